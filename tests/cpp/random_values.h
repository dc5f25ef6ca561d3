#pragma once
// Uniform values in [-1, 1) for the kernel tests, reproducible from a seed.
#include <cstdint>
#include <random>
#include <vector>

inline std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
