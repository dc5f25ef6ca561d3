// Copies and layout changes: rows copied or added between strides, axes permuted, many blocks in one launch.
#include <type_traits>

#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

// Index math in I: unsigned where every index fits (with_index_type).
template <class I>
__global__ void add_rows_kernel(float* dst, int dst_ld, const float* src, int src_ld, I columns, I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const I r = i / columns, c = i % columns;
    dst[r * dst_ld + c] += src[r * src_ld + c];
  }
}

// Rows of U units (16, 4, 2 or 1 bytes: the widest that every address and length divides).
template <class U, class I>
__global__ void copy_rows_kernel(U* dst, I dst_ld, const U* src, I src_ld, I columns, I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const I r = i / columns, c = i % columns;
    dst[r * dst_ld + c] = src[r * src_ld + c];
  }
}

// Row p (image, oy, ox) of a channels-last convolution's windows, `ld` units U long: tap by
// tap, the `units` of the image's pixel under it (zeros outside the image), then zeros.
template <class U, class I>
__global__ void windows_kernel(const U* x, U* rows, ConvShape g, I units, I ld, I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const I j = i % ld, p = i / ld, tap = j / units;
    U v{};
    if (tap < I(g.kh * g.kw)) {
      const I ox = p % g.ow, oy = p / g.ow % g.oh, image = p / (I(g.ow) * g.oh);
      const int iy = static_cast<int>(oy) * g.sy - g.pad_top + static_cast<int>(tap / g.kw) * g.dy;
      const int ix = static_cast<int>(ox) * g.sx - g.pad_left + static_cast<int>(tap % g.kw) * g.dx;
      if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) v = x[((image * g.h + iy) * g.w + ix) * units + j % units];
    }
    rows[i] = v;
  }
}
// windows_kernel's rows for pixels narrower than 16 bytes (a stem's few channels), a thread per
// 16 bytes of a row: its values (E, 2 or 4 bytes) gathered and stored whole. A thread per 2-byte
// value spent its index math on each.
template <class E, class I>
__global__ void window_rows_kernel(const E* x, uint4* rows, ConvShape g, int chunks, I total) {
  constexpr int kPer = 16 / sizeof(E);
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const I p = i / chunks, ox = p % g.ow, oy = p / g.ow % g.oh, image = p / (I(g.ow) * g.oh);
    const int y0 = static_cast<int>(oy) * g.sy - g.pad_top, x0 = static_cast<int>(ox) * g.sx - g.pad_left;
    const E* pixels = x + image * I(g.h) * g.w * g.c;
    // The first value's channel and tap, then each next one's by counting: a division per value
    // took most of the time (43 µs for ResNet-18's 3×3 stem on 3 channels at batch 512).
    const int j0 = static_cast<int>(i % chunks) * kPer, tap = j0 / g.c;
    int ch = j0 - tap * g.c, ky = tap / g.kw, kx = tap - ky * g.kw;
    union {
      E e[kPer];
      uint4 u;
    } v;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int iy = y0 + ky * g.dy, ix = x0 + kx * g.dx;
      const bool inside = ky < g.kh && iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;  // past the taps: zeros
      v.e[e] = inside ? pixels[(iy * g.w + ix) * g.c + ch] : E{};
      if (++ch == g.c) {
        ch = 0;
        if (++kx == g.kw) kx = 0, ++ky;
      }
    }
    rows[i] = v.u;
  }
}
// A 1×1 window's rows placed back: pixel (py, px) gets row (py / sy, px / sx) where the
// stride lands on it and the row exists, else zeros.
template <class U, class I>
__global__ void place_pixels_kernel(const U* rows, U* x, ConvShape g, I units, I total) {
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const I u = i % units, p = i / units, px = p % g.w, py = p / g.w % g.h, image = p / (I(g.w) * g.h);
    const I oy = py / g.sy, ox = px / g.sx;
    const bool held = py % g.sy == 0 && px % g.sx == 0 && oy < I(g.oh) && ox < I(g.ow);
    x[i] = held ? rows[((image * g.oh + oy) * g.ow + ox) * units + u] : U{};
  }
}

// V consecutive outputs per thread (a 16-byte store where they are a pack), their sources
// stepped to rather than divided out again.
template <int V, class From, class To, class I>
__global__ void permute_kernel(const From* in, To* out, I o1, I o2, I s0, I s1, I s2, I items) {
  NNGRAPH_GRID_LOOP_T(I, p, items) {
    const I i = p * V;
    I c = i % o2, b = (i / o2) % o1, a = i / (o2 * o1);
    float v[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      v[k] = ld(in[a * s0 + b * s1 + c * s2]);
      if (++c == o2) {
        c = 0;
        if (++b == o1) b = 0, ++a;
      }
    }
    store_values<V>(out + i, v);
  }
}

struct Blocks {
  Block b[16];
};

template <class I>
__global__ void copy_blocks_kernel(Blocks blocks) {
  const Block& b = blocks.b[blockIdx.y];
  const I total = I(b.rows) * b.cols;
  if (b.rows == 1) {  // a plain span: no division per element, 16 bytes a thread where aligned
    const bool whole = (reinterpret_cast<uintptr_t>(b.src) | reinterpret_cast<uintptr_t>(b.dst)) % 16 == 0;
    const I packs = whole ? total / 4 : 0;
    NNGRAPH_GRID_LOOP_T(I, i, packs) {
      reinterpret_cast<float4*>(b.dst)[i] = b.src ? reinterpret_cast<const float4*>(b.src)[i] : float4{};
    }
    NNGRAPH_GRID_LOOP_T(I, i, total - packs * 4) b.dst[packs * 4 + i] = b.src ? b.src[packs * 4 + i] : 0.f;
    return;
  }
  NNGRAPH_GRID_LOOP_T(I, i, total) {
    const I r = i / I(b.cols), c = i % I(b.cols);
    b.dst[r * b.dst_ld + c] = b.src ? b.src[r * b.src_ld + c] : 0.f;
  }
}

}  // namespace

void copy_blocks(const StepLaunch& l, const std::vector<Block>& blocks) {
  if (blocks.empty()) return;
  Blocks table{};
  size_t most = 0, largest = 0;  // elements of the largest block; the largest index formed
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks.at(i);
    table.b[i] = b;
    most = std::max(most, size_t(b.rows) * b.cols);
    largest = std::max(largest, size_t(b.rows) * std::max({b.cols, b.src_ld, b.dst_ld}));
  }
  const dim3 grid(blocks_for((most + 3) / 4), static_cast<unsigned>(blocks.size()));  // spans go 4 floats a thread
  with_index_type(largest, [&](auto i) { launch_step(l, copy_blocks_kernel<decltype(i)>, grid, kThreads, table); });
  check_launch("copy");
}

namespace {
// launch(U{}) with U the widest unit, 16, 4, 2 or 1 bytes, that `all` (every address and
// length or-ed together) is a multiple of.
template <class F>
void with_unit(uintptr_t all, F&& launch) {
  if (all % 16 == 0)
    launch(uint4{});
  else if (all % 4 == 0)
    launch(uint32_t{});
  else if (all % 2 == 0)
    launch(uint16_t{});
  else
    launch(uint8_t{});
}
}  // namespace

void copy_rows(cudaStream_t s, void* dst, size_t dst_ld, const void* src, size_t src_ld, size_t rows, size_t bytes) {
  if (!rows || !bytes) return;
  const uintptr_t all = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | dst_ld | src_ld | bytes;
  with_unit(all, [&](auto unit) {
    using U = decltype(unit);
    const size_t u = sizeof(U), total = rows * (bytes / u);
    with_index_type(rows * std::max(dst_ld, src_ld) / u, [&](auto i) {
      using I = decltype(i);
      copy_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(static_cast<U*>(dst), I(dst_ld / u),
                                                              static_cast<const U*>(src), I(src_ld / u),
                                                              I(bytes / u), I(total));
    });
  });
  check_launch("copy_rows");
}

void windows(cudaStream_t s, const ConvShape& g, const void* x, void* rows, size_t value_bytes, int ld) {
  const size_t pixel = g.c * value_bytes, row = ld * value_bytes, count = static_cast<size_t>(g.n) * g.oh * g.ow;
  if (!count || !row) return;
  if (pixel % 16 != 0 && row % 16 == 0 && reinterpret_cast<uintptr_t>(rows) % 16 == 0 &&
      (value_bytes == 2 || value_bytes == 4)) {
    with_index_type(std::max(count * ld, static_cast<size_t>(g.n) * g.h * g.w * g.c), [&](auto i) {
      using I = decltype(i);
      auto launch = [&](auto e) {
        using E = decltype(e);
        const int chunks = static_cast<int>(row / 16);
        window_rows_kernel<<<blocks_for(count * chunks), kThreads, 0, s>>>(
            static_cast<const E*>(x), static_cast<uint4*>(rows), g, chunks, I(count * chunks));
      };
      if (value_bytes == 2)
        launch(uint16_t{});
      else
        launch(uint32_t{});
    });
    return check_launch("windows");
  }
  with_unit(reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(rows) | pixel | row, [&](auto unit) {
    using U = decltype(unit);
    const size_t total = count * (row / sizeof(U));
    with_index_type(std::max(total, static_cast<size_t>(g.n) * g.h * g.w * pixel / sizeof(U)), [&](auto i) {
      using I = decltype(i);
      windows_kernel<<<blocks_for(total), kThreads, 0, s>>>(static_cast<const U*>(x), static_cast<U*>(rows), g,
                                                            I(pixel / sizeof(U)), I(row / sizeof(U)), I(total));
    });
  });
  check_launch("windows");
}

void place_pixels(cudaStream_t s, const ConvShape& g, const void* rows, void* x, size_t value_bytes) {
  const size_t pixel = g.c * value_bytes, total_pixels = static_cast<size_t>(g.n) * g.h * g.w;
  if (!total_pixels || !pixel) return;
  with_unit(reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(rows) | pixel, [&](auto unit) {
    using U = decltype(unit);
    const size_t total = total_pixels * (pixel / sizeof(U));
    with_index_type(total, [&](auto i) {
      using I = decltype(i);
      place_pixels_kernel<<<blocks_for(total), kThreads, 0, s>>>(static_cast<const U*>(rows), static_cast<U*>(x), g,
                                                                 I(pixel / sizeof(U)), I(total));
    });
  });
  check_launch("place_pixels");
}

void add_rows(cudaStream_t s, float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns) {
  const size_t total = size_t(rows) * columns;
  with_index_type(size_t(rows) * std::max({columns, dst_ld, src_ld}), [&](auto i) {
    using I = decltype(i);
    add_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(dst, dst_ld, src, src_ld, I(columns), I(total));
  });
  check_launch("copy_rows");
}

template <class From, class To>
void permute(cudaStream_t s, const From* in, To* out, const int dims[3], const int perm[3]) {
  const size_t stride[3] = {size_t(dims[1]) * dims[2], size_t(dims[2]), 1};
  const size_t total = size_t(dims[0]) * dims[1] * dims[2];
  constexpr int V = kPack<To>;
  with_index_type(total, [&](auto i) {
    using I = decltype(i);
    const I o1(dims[perm[1]]), o2(dims[perm[2]]), s0(stride[perm[0]]), s1(stride[perm[1]]), s2(stride[perm[2]]);
    if (total % V == 0 && packed(out))
      permute_kernel<V><<<blocks_for(total / V), kThreads, 0, s>>>(in, out, o1, o2, s0, s1, s2, I(total / V));
    else
      permute_kernel<1><<<blocks_for(total), kThreads, 0, s>>>(in, out, o1, o2, s0, s1, s2, I(total));
  });
  check_launch("permute");
}

#define INSTANTIATE_TO(From, To) template void permute(cudaStream_t, const From*, To*, const int[3], const int[3]);
#define INSTANTIATE(From) INSTANTIATE_TO(From, float) INSTANTIATE_TO(From, __half) INSTANTIATE_TO(From, __nv_bfloat16)
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE
#undef INSTANTIATE_TO

}  // namespace nngraph::cuda
