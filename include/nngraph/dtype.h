#pragma once
#include <cstddef>
#include <cstdint>

namespace nngraph {

// Storage types. Compute is float32 on the cpu backend; float16 is converted at the edges.
enum class DType : uint8_t { Float32, Float16 };

inline size_t dtype_size(DType t) { return t == DType::Float32 ? 4 : 2; }
const char* dtype_name(DType t);

// IEEE binary16 conversion, round to nearest even.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
// Host-memory conversion between storage types (a plain copy when they match).
void convert_host(const void* src, DType from, void* dst, DType to, size_t count);

}  // namespace nngraph
