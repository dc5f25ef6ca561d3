#pragma once
#include <cstddef>
#include <cstdint>

namespace nngraph {

// Storage types. The cpu backend computes in float32 and converts the others at the edges;
// cuda computes a graph in its format (Graph format=) with float32 accumulation.
enum class DType : uint8_t { Float32, Float16, BFloat16 };

inline size_t dtype_size(DType t) { return t == DType::Float32 ? 4 : 2; }
const char* dtype_name(DType t);
// "float32", "float16" or "bfloat16"; InvalidInput naming `what` otherwise.
DType dtype_named(const char* name, const char* what);

// The DType of a storage type (float here; the cuda backend adds its half types).
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::Float32;
};

// IEEE binary16 and bfloat16 conversion, round to nearest even (NaN stays NaN).
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);
float bfloat16_to_float(uint16_t h);
// Host-memory conversion between storage types (a plain copy when they match).
void convert_host(const void* src, DType from, void* dst, DType to, size_t count);

}  // namespace nngraph
