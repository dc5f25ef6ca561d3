#pragma once
// Shared launch helpers for the .cu files.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "backends/math.h"
#include "kernels.cuh"

namespace nngraph::cuda {

constexpr int kThreads = 256;
// Rows of c channels read side by side by a block summing columns, a thread per v channels.
__host__ __device__ inline int row_lanes(int c, int v = 1) { return c / v < kThreads ? kThreads / (c / v) : 1; }

// Explicit instantiations of a launcher template: X(T) for each storage type.
#define NNGRAPH_STORAGE_TYPES(X) X(float) X(__half) X(__nv_bfloat16)

// A stored value as float, and a float as storage type T (round to nearest even).
template <class T>
__device__ __forceinline__ float ld(T v) {
  return static_cast<float>(v);
}
template <class T>
__device__ __forceinline__ T st(float v) {
  return static_cast<T>(v);
}

// V consecutive values as floats, and back: V = 1, or kPack<T> (16 bytes, one load) where the
// address is 16-byte aligned (packed()). Bandwidth-bound kernels read half values in packs:
// one 2-byte load per thread leaves most of the memory's speed unused.
template <class T>
constexpr int kPack = 16 / sizeof(T);
inline bool packed(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
template <int V, class T>
__device__ __forceinline__ void load_values(const T* p, float* out) {
  if constexpr (V == 1) {
    out[0] = ld(*p);
  } else {
    static_assert(V == kPack<T>);
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = ld(v[k]);
  }
}
template <int V, class T>
__device__ __forceinline__ void store_values(T* p, const float* in) {
  if constexpr (V == 1) {
    *p = st<T>(in[0]);
  } else {
    static_assert(V == kPack<T>);
    uint4 raw;
    T* v = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = st<T>(in[k]);
    *reinterpret_cast<uint4*>(p) = raw;
  }
}

// V values of T as one load brought them, converted where read: a 16-byte pack stays in four
// registers until then, so more loads fit in flight.
template <int V, class T>
struct Loaded {
  using Bits = std::conditional_t<V == 1, T, uint4>;
  Bits bits;
  __device__ __forceinline__ void load(const T* p) { bits = *reinterpret_cast<const Bits*>(p); }
  // For values read once: marked to leave the caches first.
  __device__ __forceinline__ void load_streaming(const T* p) { bits = __ldcs(reinterpret_cast<const Bits*>(p)); }
  __device__ __forceinline__ float operator[](int k) const {
    if constexpr (V == 1)
      return ld(bits);
    else
      return ld(reinterpret_cast<const T*>(&bits)[k]);
  }
};

// Blocks for a grid-stride loop over `count` items (bounded: the loop covers the rest).
inline unsigned blocks_for(size_t count) {
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>((count + kThreads - 1) / kThreads, 65535 * 8)));
}

// Grid-stride loop with index type I: kernels whose per-element index math divides run with
// unsigned indices where every index they form fits (fits_32), as 64-bit division per
// element costs several times a 32-bit one and bounds such kernels.
#define NNGRAPH_GRID_LOOP_T(I, i, count) \
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < (count); i += I(gridDim.x) * blockDim.x)
#define NNGRAPH_GRID_LOOP(i, count) NNGRAPH_GRID_LOOP_T(size_t, i, count)
inline bool fits_32(size_t largest_index) { return largest_index <= 0x7fffffffu; }  // i + stride stays below 2³²

// Calls launch(I{}) with I = unsigned where every index up to `largest` fits, else size_t.
template <class F>
void with_index_type(size_t largest, F&& launch) {
  if (fits_32(largest))
    launch(0u);
  else
    launch(size_t{0});
}

// kernel<<<grid, block>>>(args...) through a StepLaunch.
template <class... P, class... A>
void launch_step(const StepLaunch& l, void (*kernel)(P...), dim3 grid, dim3 block, A&&... args) {
  std::tuple<P...> values{std::forward<A>(args)...};
  std::apply(
      [&](auto&... v) {
        if (!l.redirect) {
          kernel<<<grid, block, 0, l.stream>>>(v...);
          return;
        }
        void* pointers[] = {&v...};
        (*l.redirect)(reinterpret_cast<const void*>(kernel), grid, block, pointers);
      },
      values);
}

// An attribute of the current device, read once per process (one device type per machine).
template <cudaDeviceAttr A>
int device_attribute() {
  static const int value = [] {
    int device = 0, v = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&v, A, device);
    return v;
  }();
  return value;
}
inline int multiprocessors() { return std::max(1, device_attribute<cudaDevAttrMultiProcessorCount>()); }

// Sum over the warp; every lane gets the sum.
template <class T>
__device__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// y = f(a, b) value by value (b null: f(a, 0)), a 16-byte pack at a time where the count
// and the pointers allow.
template <int V, class T, class F>
__global__ void map_kernel(const T* a, const T* b, T* y, size_t items, F f) {
  NNGRAPH_GRID_LOOP(i, items) {
    float u[V], v[V] = {};
    load_values<V>(a + i * V, u);
    if (b) load_values<V>(b + i * V, v);
#pragma unroll
    for (int k = 0; k < V; ++k) u[k] = f(u[k], v[k]);
    store_values<V>(y + i * V, u);
  }
}
template <class T, class F>
void map_values(cudaStream_t s, const T* a, const T* b, T* y, size_t count, F f) {
  constexpr int V = kPack<T>;
  if (count % V == 0 && packed(a) && (!b || packed(b)) && packed(y))
    map_kernel<V><<<blocks_for(count / V), kThreads, 0, s>>>(a, b, y, count / V, f);
  else
    map_kernel<1><<<blocks_for(count), kThreads, 0, s>>>(a, b, y, count, f);
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the sum.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T partial[32];
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  T total = 0;
  for (int i = 0; i < static_cast<int>(blockDim.x + 31) / 32; ++i) total += partial[i];
  return total;
}

// Tiles of 32 pixels of one image by kTileRows rows of threads (blocks of tile_threads()), each
// row a share of the channels, which lie hw apart: a warp reads 32 neighbouring values where a
// block per pixel read values hw apart. Kernels loop over the tiles grid-strided.
constexpr int kTileRows = 8;
inline size_t pixel_tiles(size_t images, int hw) { return (static_cast<size_t>(hw) + 31) / 32 * images; }
inline unsigned tile_blocks(size_t tiles) { return static_cast<unsigned>(std::min<size_t>(tiles, 65535 * 8)); }
inline dim3 tile_threads() { return dim3(32, kTileRows); }

// Tile t of images of hw pixels: its image, this thread's pixel and whether that is one.
struct PixelTile {
  size_t image;
  int p;
  bool in;
  __device__ PixelTile(size_t t, int hw) {
    const size_t per = (static_cast<size_t>(hw) + 31) / 32;
    image = t / per, p = static_cast<int>(t % per) * 32 + threadIdx.x, in = p < hw;
  }
};

// The total of v over the kTileRows threads of this thread's tile column, to each of them.
__device__ __forceinline__ float column_sum(float v, float (&share)[kTileRows][32]) {
  share[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  float total = 0.f;
  for (int k = 0; k < kTileRows; ++k) total += share[k][threadIdx.x];
  __syncthreads();  // the next call writes the shares again
  return total;
}

// A neuron f(v) or its derivative f'(v) as a kernel argument: none, relu and GELU (the common
// ones, kept lean: the general switch cost the bandwidth-bound 2×2 pooling gradient a third of
// its speed, and a GELU pass through it moved 1.4 TB/s on an H200), or any.
// with_neuron(nd, launch) and with_derivative(nd, launch) call launch with the one for nd.
struct NoNeuron {
  __device__ float operator()(float v) const { return v; }
};
struct ReLUNeuron {
  __device__ float operator()(float v) const { return math::relu(v); }  // NaN stays NaN
};
struct GELUNeuron {
  __device__ float operator()(float v) const { return math::neurons::GELU::f(0.f, 0.f, 0.f, v); }
};
struct AnyNeuron {
  NeuronDescriptor nd;
  __device__ float operator()(float v) const { return math::neuron(nd, v); }
};
struct NoDerivative {
  __device__ float operator()(float) const { return 1.f; }
};
struct ReLUDerivative {
  __device__ float operator()(float v) const { return v > 0.f ? 1.f : 0.f; }
};
struct GELUDerivative {  // of its input v
  __device__ float operator()(float v) const { return math::neurons::GELU::df(0.f, 0.f, 0.f, v); }
};
struct AnyDerivative {
  NeuronDescriptor nd;
  __device__ float operator()(float v) const { return math::neuron_derivative(nd, v); }
};

template <class None, class ReLU, class GELU, class Any, class F>
void with_functor(const NeuronDescriptor& nd, F&& launch) {
  if (nd.type == NeuronType::None)
    launch(None{});
  else if (nd.type == NeuronType::ReLU)
    launch(ReLU{});
  else if (nd.type == NeuronType::GELU)
    launch(GELU{});
  else
    launch(Any{nd});
}
template <class F>
void with_neuron(const NeuronDescriptor& nd, F&& launch) {
  with_functor<NoNeuron, ReLUNeuron, GELUNeuron, AnyNeuron>(nd, launch);
}
template <class F>
void with_derivative(const NeuronDescriptor& nd, F&& launch) {
  with_functor<NoDerivative, ReLUDerivative, GELUDerivative, AnyDerivative>(nd, launch);
}

}  // namespace nngraph::cuda
