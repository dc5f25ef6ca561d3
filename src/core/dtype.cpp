#include "nngraph/dtype.h"

#include <cmath>
#include <cstring>
#include <string>

#include "nngraph/error.h"

namespace nngraph {

const char* dtype_name(DType t) {
  return t == DType::Float32 ? "float32" : t == DType::Float16 ? "float16" : "bfloat16";
}

DType dtype_named(const char* name, const char* what) {
  for (DType t : {DType::Float32, DType::Float16, DType::BFloat16})
    if (std::string(name) == dtype_name(t)) return t;
  fail("[", what, "] dtype must be float32, float16 or bfloat16, got '", name, "'");
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  const int exp = static_cast<int>((x >> 23) & 0xffu);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = exp - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // half subnormal (or zero): m = mant24 >> (14 - e)
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rolls into the exponent
  return static_cast<uint16_t>(h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&x, &v, 4);
    x |= sign;
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even; a carry rolls into the exponent
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16_to_float(uint16_t h) {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

float to_float(const void* src, DType from, size_t i) {
  if (from == DType::Float32) return static_cast<const float*>(src)[i];
  const uint16_t h = static_cast<const uint16_t*>(src)[i];
  return from == DType::Float16 ? half_to_float(h) : bfloat16_to_float(h);
}

void from_float(float v, void* dst, DType to, size_t i) {
  if (to == DType::Float32)
    static_cast<float*>(dst)[i] = v;
  else
    static_cast<uint16_t*>(dst)[i] = to == DType::Float16 ? float_to_half(v) : float_to_bfloat16(v);
}

}  // namespace

void convert_host(const void* src, DType from, void* dst, DType to, size_t count) {
  if (from == to) {
    std::memcpy(dst, src, count * dtype_size(from));
    return;
  }
  for (size_t i = 0; i < count; ++i) from_float(to_float(src, from, i), dst, to, i);
}

}  // namespace nngraph
