#pragma once
// Per-element math shared by every backend (host and, under nvcc, device): each formula is
// written once; backends only differ in how they loop.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "nngraph/descriptors.h"

#ifdef __CUDACC__
#define NNGRAPH_HD __host__ __device__
#else
#define NNGRAPH_HD
#endif

namespace nngraph::math {

// ---- dropout: the mask is a pure function of (seed, step, index), so forward and gradient
// passes (and cpu and cuda) draw the same mask without storing it.

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

// ---- neurons (NaN propagates through every one, so check_numerics sees it)

NNGRAPH_HD inline float relu(float x) { return x < 0.f ? 0.f : x; }
NNGRAPH_HD inline float leaky_relu(float a, float x) { return x < 0.f ? a * x : x; }
NNGRAPH_HD inline float linear(float a, float b, float x) { return a * x + b; }
NNGRAPH_HD inline float hard_sigmoid(float a, float b, float x) {
  const float v = a * x + b;
  return v < 0.f ? 0.f : (v > 1.f ? 1.f : v);
}

NNGRAPH_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
NNGRAPH_HD inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// e^x without branches or calls, so cpu loops over it vectorize: x = n·ln2 + r with
// |r| ≤ ln2/2, e^r by Cephes' degree-6 polynomial, 2^n through the exponent bits. Within a
// few ulp of expf; x is clamped to [−87.3, 88.3] (results saturate instead of reaching 0 or
// ∞); NaN stays NaN (the clamps compare, so they keep it).
NNGRAPH_HD inline float exp_fast(float x) {
  x = x > 88.3f ? 88.3f : x;
  x = x < -87.3f ? -87.3f : x;
  const float shift = 12582912.f;  // 1.5·2²³: the sum's low bits hold round(x·log₂e)
  const float z = x * 1.44269504f + shift;
  const float n = z - shift;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  return p * bits_float((float_bits(z) - float_bits(shift) + 127u) << 23);
}

NNGRAPH_HD inline float sigmoid(float x) { return 1.f / (1.f + exp_fast(-x)); }

// tanh through one exp: libm's tanhf goes through expm1f and costs several times more. A
// short series covers small |x|, where 1 − e^(−2|x|) would cancel; both parts are within a
// few ulp.
NNGRAPH_HD inline float tanh_fast(float x) {
  const float ax = fabsf(x);
  const float x2 = x * x;
  const float series = x * (1.f + x2 * (-1.f / 3.f + x2 * (2.f / 15.f)));
  const float e = exp_fast(-2.f * ax);
  return ax < 0.0625f ? series : copysignf((1.f - e) / (1.f + e), x);
}

// One struct per neuron type of NNGRAPH_NEURONS (nngraph/descriptors.h): f(a, b, c, x); its
// derivative df(a, b, c, v) from v = f(x) where from_output(a), else from x. From the output
// is impossible for a non-monotonic f (absolute, gelu, silu, hard swish), for power (its
// base need not be monotonic in y), and for leaky relu, elu and relun with a < 0: their
// negative branch then turns positive, so y's sign no longer tells the branch.
#define NNGRAPH_NEURON_ARGS [[maybe_unused]] float a, [[maybe_unused]] float b, [[maybe_unused]] float c
namespace neurons {
struct None {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return x; }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float) { return 1.f; }
  NNGRAPH_HD static bool from_output(float) { return true; }
};
struct ReLU {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return relu(x); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return v > 0.f ? 1.f : 0.f; }
  NNGRAPH_HD static bool from_output(float) { return true; }
};
struct LeakyReLU {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return leaky_relu(a, x); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return v > 0.f ? 1.f : a; }  // from x or (a >= 0) y
  NNGRAPH_HD static bool from_output(float a) { return !(a < 0.f); }
};
struct Sigmoid {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return sigmoid(x); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return v * (1.f - v); }
  NNGRAPH_HD static bool from_output(float) { return true; }
};
struct HardSigmoid {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return hard_sigmoid(a, b, x); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return (v > 0.f && v < 1.f) ? a : 0.f; }
  NNGRAPH_HD static bool from_output(float) { return true; }
};
struct TanH {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return a * tanh_fast(b * x); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return a == 0.f ? 0.f : b * (a - v * v / a); }
  NNGRAPH_HD static bool from_output(float) { return true; }
};
struct Linear {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return linear(a, b, x); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float) { return a; }
  NNGRAPH_HD static bool from_output(float) { return true; }
};
struct ELU {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return x >= 0.f ? x : a * expm1f(x); }
  // a < 0: v is x.
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return v > 0.f ? 1.f : (a < 0.f ? a * expf(v) : v + a); }
  NNGRAPH_HD static bool from_output(float a) { return !(a < 0.f); }
};
struct SoftPlus {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) {
    const float z = b * x;  // log1p(e^z) without overflow
    return a * (z > 0.f ? z + log1pf(expf(-z)) : log1pf(expf(z)));
  }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return a == 0.f ? 0.f : a * b * -expm1f(-v / a); }
  NNGRAPH_HD static bool from_output(float) { return true; }
};
struct Absolute {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return fabsf(x); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return v > 0.f ? 1.f : (v < 0.f ? -1.f : 0.f); }
  NNGRAPH_HD static bool from_output(float) { return false; }
};
// GELU's e^x and 1/x: the device's special-function unit (2 and 2 instructions; about 1e-7
// relative error where GELU's arguments lie), exp_fast and a division on the host (branch-free,
// so cpu loops vectorize).
NNGRAPH_HD inline float gelu_exp(float x) {
#ifdef __CUDA_ARCH__
  return __expf(x);
#else
  return exp_fast(x);
#endif
}
NNGRAPH_HD inline float gelu_reciprocal(float x) {
#ifdef __CUDA_ARCH__
  return __fdividef(1.f, x);
#else
  return 1.f / x;
#endif
}
// Φ(−|x|) = erfc(|x|/√2)/2, Φ the standard normal distribution, by Abramowitz and Stegun's
// 7.1.26 (erfc within 1.5e-7), given e = e^(−x²/2), which f' needs too.
NNGRAPH_HD inline float normal_tail(float x, float e) {
  const float t = gelu_reciprocal(1.f + 0.23164189f * fabsf(x));  // 0.3275911/√2
  return 0.5f * e * t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
}
// x·Φ(x). One exponential serves Φ and f' = Φ + x·φ. Over [−12, 12], f is within 4.2e-7 of a
// float64 reference and f' within 3.2e-7 on the cpu; erf's form (PyTorch's) had 4.5e-7 and 1.4e-7,
// lost all relative accuracy in the far negative tail, and took 29 and 44 instructions a value on
// sm_90 (PTX, loads and stores aside), against 18 and 19, in passes (batch norm + GELU) bound
// by that arithmetic.
struct GELU {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) {
    const float tail = normal_tail(x, gelu_exp(-0.5f * x * x));
    return x * (x >= 0.f ? 1.f - tail : tail);
  }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float x) {
    const float e = gelu_exp(-0.5f * x * x), tail = normal_tail(x, e);
    return (x >= 0.f ? 1.f - tail : tail) + x * 0.39894228f * e;
  }
  NNGRAPH_HD static bool from_output(float) { return false; }
};
struct GELUTanh {  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) {
    return 0.5f * x * (1.f + tanh_fast(0.79788456f * (x + 0.044715f * x * x * x)));
  }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float x) {
    const float t = tanh_fast(0.79788456f * (x + 0.044715f * x * x * x));
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * 0.79788456f * (1.f + 0.134145f * x * x);
  }
  NNGRAPH_HD static bool from_output(float) { return false; }
};
struct SiLU {  // x·σ(a·x) (swish; a = 1 is SiLU)
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return x * sigmoid(a * x); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float x) {
    const float s = sigmoid(a * x);
    return s * (1.f + a * x * (1.f - s));
  }
  NNGRAPH_HD static bool from_output(float) { return false; }
};
struct HardSwish {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) {
    const float r = x + 3.f;
    return x * (r < 0.f ? 0.f : (r > 6.f ? 6.f : r)) * (1.f / 6.f);
  }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float x) {
    return x < -3.f ? 0.f : (x > 3.f ? 1.f : (2.f * x + 3.f) * (1.f / 6.f));
  }
  NNGRAPH_HD static bool from_output(float) { return false; }
};
struct ReLUN {  // min(leaky relu, b): relu6 by default
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) {
    const float v = leaky_relu(a, x);
    return v > b ? b : v;
  }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) {  // v is y for a >= 0, else x
    if (a < 0.f) return v >= 0.f ? (v < b ? 1.f : 0.f) : (a * v < b ? a : 0.f);
    return v >= b ? 0.f : (v > 0.f ? 1.f : a);
  }
  NNGRAPH_HD static bool from_output(float a) { return !(a < 0.f); }
};
// ln c, where c = -1 stands for e.
NNGRAPH_HD inline float log_base(float c) { return c == -1.f ? 1.f : logf(c); }
struct Power {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return powf(a + b * x, c); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float x) {
    return c == 0.f ? 0.f : c * b * powf(a + b * x, c - 1.f);
  }
  NNGRAPH_HD static bool from_output(float) { return false; }
};
struct Exponential {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return expf((a * x + b) * log_base(c)); }
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return a * log_base(c) * v; }
  NNGRAPH_HD static bool from_output(float) { return true; }
};
struct Logarithm {
  NNGRAPH_HD static float f(NNGRAPH_NEURON_ARGS, float x) { return logf(a * x + b) / log_base(c); }
  // a·x + b = c^y
  NNGRAPH_HD static float df(NNGRAPH_NEURON_ARGS, float v) { return a / (log_base(c) * expf(v * log_base(c))); }
  NNGRAPH_HD static bool from_output(float) { return true; }
};
}  // namespace neurons
#undef NNGRAPH_NEURON_ARGS

// The switches over every type (macro arguments named apart from n.a and n.b).
NNGRAPH_HD inline float neuron(const NeuronDescriptor& n, float x) {
  switch (n.type) {
#define NNGRAPH_NEURON_F(type, name, da, db, dc) \
  case NeuronType::type: return neurons::type::f(n.a, n.b, n.c, x);
    NNGRAPH_NEURONS(NNGRAPH_NEURON_F)
#undef NNGRAPH_NEURON_F
  }
  return x;
}

// Whether f'(x) follows from y = f(x) alone.
NNGRAPH_HD inline bool derivative_from_output(const NeuronDescriptor& n) {
  switch (n.type) {
#define NNGRAPH_NEURON_FROM(type, name, da, db, dc) \
  case NeuronType::type: return neurons::type::from_output(n.a);
    NNGRAPH_NEURONS(NNGRAPH_NEURON_FROM)
#undef NNGRAPH_NEURON_FROM
  }
  return true;
}

// f'(x), from y = f(x) where derivative_from_output(n), else from x.
NNGRAPH_HD inline float neuron_derivative(const NeuronDescriptor& n, float v) {
  switch (n.type) {
#define NNGRAPH_NEURON_DF(type, name, da, db, dc) \
  case NeuronType::type: return neurons::type::df(n.a, n.b, n.c, v);
    NNGRAPH_NEURONS(NNGRAPH_NEURON_DF)
#undef NNGRAPH_NEURON_DF
  }
  return 1.f;
}

// ---- arithmetic of two images

NNGRAPH_HD inline float arithmetic(ArithmeticOp op, float a, float b) {
  switch (op) {
    case ArithmeticOp::Add: return a + b;
    case ArithmeticOp::Subtract: return a - b;
    case ArithmeticOp::Multiply: return a * b;
    case ArithmeticOp::Divide: return a / b;
  }
  return a;
}

// ∂(a op b)/∂a (operand 0) or ∂(a op b)/∂b (operand 1).
NNGRAPH_HD inline float arithmetic_partial(ArithmeticOp op, int operand, float a, float b) {
  switch (op) {
    case ArithmeticOp::Add: return 1.f;
    case ArithmeticOp::Subtract: return operand == 0 ? 1.f : -1.f;
    case ArithmeticOp::Multiply: return operand == 0 ? b : a;
    case ArithmeticOp::Divide: return operand == 0 ? 1.f / b : -a / (b * b);
  }
  return 0.f;
}

// Element offsets of an operand read at the result's (n, c, y, x): stride 0 along its axes of
// extent 1, so it broadcasts.
struct Broadcast {
  long long n = 0, c = 0, y = 0;  // x: 1, or 0 when the operand is one column wide
  int x = 0;
  Broadcast() = default;
  NNGRAPH_HD Broadcast(int batch, int channels, int height, int width)
      : n(batch == 1 ? 0 : static_cast<long long>(channels) * height * width),
        c(channels == 1 ? 0 : static_cast<long long>(height) * width), y(height == 1 ? 0 : width), x(width == 1 ? 0 : 1) {}
  NNGRAPH_HD long long at(int in, int ic, int iy, int ix) const { return in * n + ic * c + iy * y + ix * x; }
};

// ---- losses (double precision per term; see LossDescriptor for the reductions)

NNGRAPH_HD inline double smoothed(const LossDescriptor& d, double l, int channels) {
  if (d.label_smoothing <= 0.f) return l;
  const double to = d.type == LossType::SigmoidCrossEntropy ? 0.5 : 1.0 / channels;
  return l * (1.0 - d.label_smoothing) + d.label_smoothing * to;
}

// Elementwise losses: value, and d/dx into *grad.
NNGRAPH_HD inline double loss_element(const LossDescriptor& d, double x, double l, double* grad) {
  const double e = d.epsilon;
  switch (d.type) {
    case LossType::SigmoidCrossEntropy:
      *grad = 1.0 / (1.0 + exp(-x)) - l;
      return fmax(x, 0.0) - x * l + log1p(exp(-fabs(x)));
    case LossType::MeanSquaredError:
      *grad = 2.0 * (x - l);
      return (x - l) * (x - l);
    case LossType::MeanAbsoluteError:
      *grad = x > l ? 1.0 : (x < l ? -1.0 : 0.0);
      return fabs(x - l);
    case LossType::Huber: {
      const double r = x - l, a = fabs(r);
      if (a <= d.delta) {
        *grad = r;
        return 0.5 * r * r;
      }
      *grad = r > 0 ? d.delta : -d.delta;
      return d.delta * (a - 0.5 * d.delta);
    }
    case LossType::Hinge: {
      const double m = 1.0 - l * x;
      *grad = m > 0 ? -l : 0.0;
      return fmax(m, 0.0);
    }
    case LossType::Log:
      *grad = -(l / (x + e) - (1.0 - l) / (1.0 - x + e));
      return -(l * log(x + e) + (1.0 - l) * log(1.0 - x + e));
    default: *grad = 0; return 0;
  }
}

// One channel's term of softmax / categorical cross-entropy or KL divergence, for score x and
// (smoothed) label l; lse and lsum, softmax cross-entropy's log-sum-exp of the pixel's scores
// and sum of its labels, are unused by the others. Writes gs·d/dx into *g.
// G: the gradient's storage type (float, or a cuda half type).
template <class G>
NNGRAPH_HD inline double channel_term(const LossDescriptor& d, double x, double l, double lse, double lsum, double gs,
                                      G* g) {
  if (d.type == LossType::SoftMaxCrossEntropy) {
    *g = static_cast<G>(static_cast<float>(gs * (exp(x - lse) * lsum - l)));
    return -l * (x - lse);
  }
  const double q = fmax(x, static_cast<double>(d.epsilon));
  *g = static_cast<G>(static_cast<float>(gs * -l / q));
  if (d.type == LossType::CategoricalCrossEntropy) return -l * log(q);
  return l > 0 ? l * (log(l) - log(q)) : 0.0;
}

// Those losses at one pixel: channels are `stride` apart. Writes gs·d/dx into g; returns the pixel's loss.
// X and G: the scores' and gradient's storage type.
template <class X, class G>
NNGRAPH_HD inline double loss_channels(const LossDescriptor& d, const X* x, const float* lab, size_t stride, int c,
                                       double gs, G* g) {
  double lse = 0, lsum = 0;
  if (d.type == LossType::SoftMaxCrossEntropy) {
    double mx = -INFINITY, z = 0;
    for (int ch = 0; ch < c; ++ch) mx = fmax(mx, static_cast<double>(static_cast<float>(x[ch * stride])));
    for (int ch = 0; ch < c; ++ch) z += exp(static_cast<float>(x[ch * stride]) - mx);
    lse = mx + log(z);
    for (int ch = 0; ch < c; ++ch) lsum += smoothed(d, lab[ch * stride], c);
  }
  double total = 0;
  for (int ch = 0; ch < c; ++ch)
    total += channel_term(d, static_cast<float>(x[ch * stride]), smoothed(d, lab[ch * stride], c), lse, lsum, gs,
                          g + ch * stride);
  return total;
}

}  // namespace nngraph::math
