#pragma once
// The dropout mask as a pure function of (seed, step, index), shared by every backend so
// forward and gradient passes (and cpu and cuda) draw the same mask without storing it.
#include <cstdint>

#ifdef __CUDACC__
#define NNGRAPH_HD __host__ __device__
#else
#define NNGRAPH_HD
#endif

namespace nngraph {

NNGRAPH_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Stream key for one encode of one node.
NNGRAPH_HD inline uint64_t dropout_key(uint64_t seed, uint64_t step) {
  return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ (step * 0xd1b54a32d192ed03ull));
}

// True when element i is kept (probability `keep`, 24-bit resolution).
NNGRAPH_HD inline bool dropout_keep(uint64_t key, uint64_t i, float keep) {
  const uint32_t bits = static_cast<uint32_t>(mix64(key + i * 0x9e3779b97f4a7c15ull) >> 40);
  return static_cast<float>(bits) * (1.0f / 16777216.0f) < keep;
}

}  // namespace nngraph
