#pragma once
// Per-channel sums over rows of channels (fully connected results, channels-last pixels), in
// two stages: blocks over chunks of rows write partial sums, a second pass adds the chunks.
// Batch normalization's moments and gradient sums and a bias gradient share the first stage;
// its elementwise passes over rows, the row pass.
#include "common.cuh"

namespace nngraph::cuda {

// f(std::integral_constant<int, V>) with V = the pack of T where the planes (hw), or the
// rows (c, where hw is 1), are a multiple of it and the pointers are aligned to one, else 1.
template <class T, class F>
void with_pack(int c, int hw, bool aligned, F&& f) {
  if ((hw == 1 ? c : hw) % kPack<T> == 0 && aligned)
    f(std::integral_constant<int, kPack<T>>{});
  else
    f(std::integral_constant<int, 1>{});
}

// Chunks of n rows of c channels for column_partial_kernel: 32 rows per lane of a thread per
// channel, and at most two blocks per multiprocessor: a block's start (its channels'
// constants) and end (its sums) cost as much as many rows (the speed run's batch-norm
// gradient sums took 22% less time than with 1024 blocks).
inline int row_chunks(int n, int c) {
  const int rows = 32 * row_lanes(std::max(1, c));
  return std::max(1, std::min({n, (n + rows - 1) / rows, 2 * multiprocessors(), 1024}));
}

// Block (columns, chunk)'s share of n rows of c channels, V at a time: thread `group` of the
// row's c / V, `lane` of the `lanes` rows read side by side (coalesced across the row), and the
// chunk's rows [r0, r1); `width` groups a block.
struct ColumnLanes {
  int groups, width, lanes, group, lane, r0, r1;
  __device__ ColumnLanes(int n, int c, int v, int chunks)
      : groups(c / v),
        width(groups < kThreads ? groups : kThreads),
        lanes(row_lanes(c, v)),
        group(static_cast<int>(blockIdx.x) * width + static_cast<int>(threadIdx.x) % width),
        lane(static_cast<int>(threadIdx.x) / width),
        r0(static_cast<int>(static_cast<long>(n) * blockIdx.y / chunks)),
        r1(static_cast<int>(static_cast<long>(n) * (blockIdx.y + 1) / chunks)) {}
  __device__ bool active() const { return lane < lanes && group < groups; }
};

// A block's S sums (a, and b where S is 2) of its V channels per thread, over the lanes, to
// partial[S · (chunk · c + ch) + which] (column_partial_kernel's layout; chunk = blockIdx.y).
template <int S, int V>
__device__ void write_partials(const ColumnLanes& share, const float (&a)[V], const float (&b)[V], float* partial,
                               int c) {
  __shared__ float sums[S][kThreads * V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    sums[0][threadIdx.x * V + k] = a[k];
    if constexpr (S == 2) sums[S - 1][threadIdx.x * V + k] = b[k];
  }
  __syncthreads();
  // Each of the block's S·width·V sums over the lanes by a thread of its own (a thread per
  // group adding every lane's V values in turn took most of the kernel's time).
  const int values = share.width * V;
  for (int o = threadIdx.x; o < S * values; o += blockDim.x) {
    const int which = o / values, at = o % values, ch = blockIdx.x * values + at;
    if (ch >= c) continue;
    float t = 0.f;
    for (int l = 0; l < share.lanes; ++l) t += sums[which][l * values + at];
    partial[S * (static_cast<size_t>(blockIdx.y) * c + ch) + which] = t;
  }
}

// Block (columns, chunk) sums its ColumnLanes share of the rows. Terms gives Terms::kSums sums
// per element (one or two), of Terms::kReads arrays of Terms::Value: load() reads an element's
// V values from `at`, add_each() adds them to the sums with their channels' Constants
// (constants(ch)). Sum `which` of channel ch goes to partial[kSums · (chunk · c + ch) + which].
// Two blocks a multiprocessor (row_chunks' grid) whatever the terms' registers.
template <int V, class Terms>
__global__ void __launch_bounds__(kThreads, 2) column_partial_kernel(Terms terms, float* partial, int n, int c,
                                                                     int chunks) {
  const ColumnLanes share(n, c, V, chunks);
  const int lanes = share.lanes, lane = share.lane;
  float a[V] = {}, b[V] = {};
  if (share.active()) {
    typename Terms::Constants k[V];
#pragma unroll
    for (int i = 0; i < V; ++i) k[i] = terms.constants(share.group * V + i);
    const int r1 = share.r1;
    const size_t column = static_cast<size_t>(share.group) * V;
    // U rows' loads in flight before their sums, unconverted (row_pass_kernel's measure): a
    // thread's few rows would otherwise wait on one load after another.
    constexpr int U = 8 / Terms::kReads;
    int r = share.r0 + lane;
    for (; r + (U - 1) * lanes < r1; r += U * lanes) {
      Loaded<V, typename Terms::Value> reads[U][Terms::kReads];
#pragma unroll
      for (int u = 0; u < U; ++u) terms.template load<V>(static_cast<size_t>(r + u * lanes) * c + column, reads[u]);
#pragma unroll
      for (int u = 0; u < U; ++u)
        terms.template add_each<V>(static_cast<size_t>(r + u * lanes) * c + column, reads[u], k, a, b);
    }
    for (; r < r1; r += lanes) {
      Loaded<V, typename Terms::Value> reads[Terms::kReads];
      terms.template load<V>(static_cast<size_t>(r) * c + column, reads);
      terms.template add_each<V>(static_cast<size_t>(r) * c + column, reads, k, a, b);
    }
  }
  write_partials<Terms::kSums, V>(share, a, b, partial, c);
}

// Rows of c channels, elementwise with per-channel coefficients (batch normalization's
// passes over channels-last pixels): block (columns, chunk) walks its ColumnLanes share of
// the rows, each thread holding its V channels' coefficients
// (Pass::Held<V>, from hold()) and U rows' loads in flight (Pass::load(), kReads arrays of
// Pass::Value, kept unconverted), then Pass::finish() each. On an H200, ResNet-18's 29
// normalizing passes took 0.59 ms at U 8 (0.63 at U 2 and 0.72 as a thread per pack that
// looked its channel's coefficients up, one load in flight).
template <int V, class Pass>
__global__ void row_pass_kernel(Pass pass, int n, int c, int chunks) {
  const ColumnLanes share(n, c, V, chunks);
  if (!share.active()) return;
  const int column = share.group * V, lanes = share.lanes, r1 = share.r1;
  typename Pass::template Held<V> k;
  pass.template hold<V>(column, k);
  constexpr int U = 16 / Pass::kReads;
  int r = share.r0 + share.lane;
  for (; r + (U - 1) * lanes < r1; r += U * lanes) {
    Loaded<V, typename Pass::Value> reads[U][Pass::kReads];
#pragma unroll
    for (int u = 0; u < U; ++u) pass.template load<V>(r + u * lanes, column, reads[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) pass.template finish<V>(r + u * lanes, column, reads[u], k);
  }
  for (; r < r1; r += lanes) {
    Loaded<V, typename Pass::Value> reads[Pass::kReads];
    pass.template load<V>(r, column, reads);
    pass.template finish<V>(r, column, reads, k);
  }
}

// row_pass_kernel over n rows of c channels, in packs where they fit: about 16 rows a thread.
template <class T, class Pass>
void row_pass(cudaStream_t s, const Pass& pass, int n, int c) {
  with_pack<T>(c, 1, pass.aligned(), [&](auto v) {
    constexpr int V = decltype(v)::value;
    const int rows = 16 * row_lanes(c, V);
    const int chunks = std::max(1, std::min((n + rows - 1) / rows, 65535));
    row_pass_kernel<V><<<dim3((c / V + kThreads - 1) / kThreads, chunks), kThreads, 0, s>>>(pass, n, c, chunks);
  });
}

// column_partial_kernel over n rows of c channels in `chunks` chunks, in packs where they fit.
template <class T, class Terms>
void column_partials(cudaStream_t s, const Terms& terms, float* partial, int n, int c, int chunks) {
  with_pack<T>(c, 1, terms.aligned(), [&](auto v) {
    constexpr int V = decltype(v)::value;
    column_partial_kernel<V><<<dim3((c / V + kThreads - 1) / kThreads, chunks), kThreads, 0, s>>>(terms, partial, n,
                                                                                                 c, chunks);
  });
}

}  // namespace nngraph::cuda
