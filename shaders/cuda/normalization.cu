// Batch normalization (NCHW, or rows of one value per channel: a fully connected layer's
// results, channels-last pixels): per-channel sums in two stages (blocks over chunks of
// images or rows, then one thread per channel in double), and one elementwise pass that
// applies them. Planes, or rows, whose size is a multiple of a 16-byte pack are read and
// written a pack at a time (V values).
#include <type_traits>

#include "columns.cuh"
#include "common.cuh"
#include "kernels.cuh"
#include "normalization.cuh"

namespace nngraph::cuda {
namespace {

// The two per-channel sums each pass needs, of a value pair per element: load() reads the V
// elements from `at` (kReads arrays of them), add() adds them to a and b with the channel's
// Constants (constants(ch)), add_each() each to its own channel's (rows); both are told `at`.
template <class T>
struct MomentTerms {  // forward: (x − shift) and its square; shift is the channel's first value
  const T* x;
  int hw;
  using Constants = float;
  using Value = T;
  static constexpr int kReads = 1, kSums = 2;
  bool aligned() const { return packed(x); }
  __device__ float constants(int ch) const { return ld(x[static_cast<size_t>(ch) * hw]); }
  template <int V>
  __device__ void load(size_t at, Loaded<V, T> (&r)[kReads]) const {
    r[0].load(x + at);
  }
  template <int V>
  __device__ void add_each(size_t, const Loaded<V, T> (&r)[kReads], const float* shift, float* a, float* b) const {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float d = r[0][k] - shift[k];
      a[k] += d;
      b[k] += d * d;
    }
  }
  template <int V>
  __device__ void add(size_t, const Loaded<V, T> (&r)[kReads], float shift, float& a, float& b) const {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float d = r[0][k] - shift;
      a += d;
      b += d * d;
    }
  }
};

// A channel's batch mean, and the scale and shift that normalized it (normalize_kernel's).
struct Normalized {
  float mean, scale, shift;
};
__device__ inline Normalized normalized(const float* gamma, const float* beta, const float* stats, int c, int ch) {
  const float mean = stats[ch], scale = gamma[ch] * stats[c + ch];
  return {mean, scale, beta[ch] - mean * scale};
}

template <class T, class P>
struct GradientTerms {  // backward: g and g·(x − mean), g = dy ⊙ through(x·scale + shift)
  const T* x;
  const T* dy;
  const float *gamma, *beta, *stats;
  int c;
  P through;
  int dy_ld;  // rows (hw 1): values between dy's rows, more than c in a view of wider ones
  // Where set (dx's memory, for a costly derivative), the sums' pass stores each g there at x's
  // index, and the input gradient reads it back instead of evaluating the derivative again.
  T* g_out = nullptr;
  using Constants = Normalized;
  using Value = T;
  static constexpr int kReads = 2, kSums = 2;  // x, dy
  bool aligned() const { return packed(x) && packed(dy) && dy_ld % kPack<T> == 0 && packed(g_out); }
  // dy's element for x's element `at` (a pack never straddles rows: c is a multiple of it).
  __device__ size_t dy_at(size_t at) const { return dy_ld == c ? at : at / c * dy_ld + at % c; }
  __device__ Normalized constants(int ch) const { return normalized(gamma, beta, stats, c, ch); }
  __device__ float passed(float g, float v, const Normalized& k) const {
    return P::kNone ? g : g * through(v * k.scale + k.shift);
  }
  // The input gradient's: g as read, where the sums' pass stored it there (or no neuron).
  __device__ float passed_once(float g, float v, float scale, float shift) const {
    return P::kNone || g_out ? g : g * through(v * scale + shift);
  }
  template <int V>
  __device__ void load(size_t at, Loaded<V, T> (&r)[kReads]) const {
    r[0].load(x + at);
    r[1].load(dy + dy_at(at));
  }
  template <int V>
  __device__ void add_each(size_t at, const Loaded<V, T> (&r)[kReads], const Normalized* k, float* a, float* b) const {
    float d[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      d[i] = passed(r[1][i], r[0][i], k[i]);
      a[i] += d[i];
      b[i] += d[i] * (r[0][i] - k[i].mean);
    }
    if (g_out) store_values<V>(g_out + at, d);
  }
  template <int V>
  __device__ void add(size_t at, const Loaded<V, T> (&r)[kReads], const Normalized& k, float& a, float& b) const {
    float d[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      d[i] = passed(r[1][i], r[0][i], k);
      a += d[i];
      b += d[i] * (r[0][i] - k.mean);
    }
    if (g_out) store_values<V>(g_out + at, d);
  }
};

// Stage 1, planes: block (channel, chunk) sums over its images' planes of that channel (rows:
// columns.cuh's column_partial_kernel).
template <int V, class Terms>
__global__ void plane_partial_kernel(Terms terms, float* partial, int n, int c, int hw, int chunks) {
  const int ch = blockIdx.x, chunk = blockIdx.y;
  const typename Terms::Constants k = terms.constants(ch);
  const int n0 = static_cast<int>(static_cast<long>(n) * chunk / chunks);
  const int n1 = static_cast<int>(static_cast<long>(n) * (chunk + 1) / chunks);
  float a = 0.f, b = 0.f;
  for (int img = n0; img < n1; ++img) {
    const size_t base = (static_cast<size_t>(img) * c + ch) * hw;
    for (int i = threadIdx.x * V; i < hw; i += blockDim.x * V) {
      Loaded<V, typename Terms::Value> r[Terms::kReads];
      terms.template load<V>(base + i, r);
      terms.template add<V>(base + i, r, k, a, b);
    }
  }
  a = block_sum(a);
  b = block_sum(b);
  if (threadIdx.x == 0) {
    partial[2 * (static_cast<size_t>(chunk) * c + ch)] = a;
    partial[2 * (static_cast<size_t>(chunk) * c + ch) + 1] = b;
  }
}

template <class T, class Terms>
void partial_sums(cudaStream_t s, Terms terms, float* partial, int n, int c, int hw, int chunks) {
  if (hw == 1)
    column_partials<T>(s, terms, partial, n, c, chunks);
  else
    with_pack<T>(c, hw, terms.aligned(), [&](auto v) {
      plane_partial_kernel<decltype(v)::value><<<dim3(c, chunks), kThreads, 0, s>>>(terms, partial, n, c, hw, chunks);
    });
}

// y = x·scale + shift for channel ch: the batch's coefficients from its state (training), else
// from the running statistics.
__device__ inline float2 scale_shift(const float* stats, const float* gamma, const float* beta, const float* mean,
                                     const float* var, float epsilon, unsigned c, unsigned ch) {
  const float scale = stats ? stats[kScale * c + ch] : gamma[ch] * rsqrtf(var[ch] + epsilon);
  return {scale, stats ? stats[kShift * c + ch] : beta[ch] - mean[ch] * scale};
}

// Stage 2, forward, a block per channel.
template <class T>
__global__ void moments_kernel(const T* x, const float* partial, int chunks, int c, int hw, double count,
                               float epsilon, const float* gamma, const float* beta, float* stats) {
  channel_moments(x, partial, chunks, c, hw, count, epsilon, gamma, beta, stats, static_cast<int>(blockIdx.x));
}

// Stage 2, backward, a block per channel.
__global__ void gradient_totals_kernel(const float* partial, int chunks, int c, float* stats, float* dgamma,
                                       float* dbeta, float inv_count) {
  channel_gradient(partial, chunks, c, stats, dgamma, dbeta, inv_count, static_cast<int>(blockIdx.x));
}

// y = neuron(x·scale + shift (+ addend)) over planes of hw values (a multiple of V): scale and
// shift per channel from the batch state (training) or the running statistics.
template <int V, class T, class I, class F>
__global__ void normalize_kernel(const T* x, const T* addend, T* y, I items, unsigned c, unsigned hw,
                                 const float* gamma, const float* beta, const float* mean, const float* var,
                                 const float* stats, float epsilon, F neuron) {
  NNGRAPH_GRID_LOOP_T(I, i, items) {
    const unsigned ch = static_cast<unsigned>(i * V / hw % c);
    const float2 k = scale_shift(stats, gamma, beta, mean, var, epsilon, c, ch);
    float v[V], a[V] = {};
    load_values<V>(x + i * V, v);
    if (addend) load_values<V>(addend + i * V, a);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = neuron(v[j] * k.x + k.y + a[j]);
    store_values<V>(y + i * V, v);
  }
}

// dx = scale·passed + slope·(x − mean) + offset per channel (BatchNormalizationGradientKernel's
// formula), passed = dy through the terms' neuron gradient (or g, as the sums' pass stored it in
// dx): one value of channel ch; the kernel's items are planes' as normalize_kernel's.
template <class T, class P>
__device__ inline float input_gradient(const GradientTerms<T, P>& terms, float x, float g, unsigned ch) {
  const float* stats = terms.stats;
  const unsigned c = terms.c;
  const float scale = stats[kScale * c + ch];
  const float passed = terms.passed_once(g, x, scale, stats[kShift * c + ch]);
  return scale * passed + stats[kSlope * c + ch] * (x - stats[ch]) + stats[kOffset * c + ch];
}
template <int V, class I, class T, class P>
__global__ void input_gradient_kernel(GradientTerms<T, P> terms, T* dx, I items, unsigned hw) {
  const unsigned c = terms.c;
  NNGRAPH_GRID_LOOP_T(I, i, items) {
    const unsigned ch = static_cast<unsigned>(i * V / hw % c);
    float v[V], g[V];
    load_values<V>(terms.x + i * V, v);
    load_values<V>((terms.g_out ? terms.g_out : terms.dy) + i * V, g);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = input_gradient(terms, v[k], g[k], ch);
    store_values<V>(dx + i * V, v);
  }
}

// The two passes over rows (hw 1, rows y_ld and dy_ld values apart), columns.cuh's row_pass:
// normalize_kernel's values, and input_gradient_kernel's.
template <class T, class F>
struct NormalizeRows {
  const T *x, *addend;
  T* y;
  int y_ld, c;
  const float *gamma, *beta, *mean, *var, *stats;
  float epsilon;
  F neuron;
  using Value = T;
  static constexpr int kReads = 2;  // x, addend
  bool aligned() const { return packed(x) && packed(y) && packed(addend) && y_ld % kPack<T> == 0; }
  template <int V>
  struct Held {
    float scale[V], shift[V];
  };
  template <int V>
  __device__ void hold(int column, Held<V>& k) const {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float2 s = scale_shift(stats, gamma, beta, mean, var, epsilon, c, column + i);
      k.scale[i] = s.x, k.shift[i] = s.y;
    }
  }
  template <int V>
  __device__ void load(int r, int column, Loaded<V, T> (&v)[kReads]) const {
    const size_t at = static_cast<size_t>(r) * c + column;
    v[0].load(x + at);
    if (addend) v[1].load(addend + at);
  }
  template <int V>
  __device__ void finish(int r, int column, const Loaded<V, T> (&v)[kReads], const Held<V>& k) const {
    float out[V];
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = neuron(v[0][i] * k.scale[i] + k.shift[i] + (addend ? v[1][i] : 0.f));
    store_values<V>(y + static_cast<size_t>(r) * y_ld + column, out);
  }
};

template <class T, class P>
struct InputGradientRows {
  GradientTerms<T, P> terms;
  T* dx;
  int dx_ld;  // values between dx's rows, more than c in a view of wider ones
  using Value = T;
  static constexpr int kReads = 2;  // x, and dy or g
  bool aligned() const { return terms.aligned() && packed(dx) && dx_ld % kPack<T> == 0; }
  template <int V>
  struct Held {
    float scale[V], shift[V], slope[V], offset[V];  // offset less slope·mean
  };
  template <int V>
  __device__ void hold(int column, Held<V>& k) const {
    const float* s = terms.stats;
    const int c = terms.c;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const int ch = column + i;
      k.scale[i] = s[kScale * c + ch], k.shift[i] = s[kShift * c + ch], k.slope[i] = s[kSlope * c + ch];
      k.offset[i] = s[kOffset * c + ch] - k.slope[i] * s[ch];
    }
  }
  template <int V>
  __device__ void load(int r, int column, Loaded<V, T> (&v)[kReads]) const {
    const size_t at = static_cast<size_t>(r) * terms.c + column;
    v[0].load(terms.x + at);
    v[1].load(terms.g_out ? terms.g_out + at : terms.dy + static_cast<size_t>(r) * terms.dy_ld + column);
  }
  template <int V>
  __device__ void finish(int r, int column, const Loaded<V, T> (&v)[kReads], const Held<V>& k) const {
    float out[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float x = v[0][i], g = v[1][i];
      const float passed = terms.passed_once(g, x, k.scale[i], k.shift[i]);
      out[i] = k.scale[i] * passed + k.slope[i] * x + k.offset[i];
    }
    store_values<V>(dx + static_cast<size_t>(r) * dx_ld + column, out);
  }
};

// Many nodes' running statistics in one launch (their kernels alone were a launch of a few
// channels each): block b moves node t's channels with first[t] <= b < first[t + 1].
constexpr int kMovesPerLaunch = 90;
struct Moves {
  StatisticsMove node[kMovesPerLaunch];
  unsigned first[kMovesPerLaunch + 1];
  int n;
};
static_assert(sizeof(Moves) <= 4096, "kernel parameters are limited to 4 KB");

__global__ void statistics_kernel(Moves m) {
  int t = 0;
  while (t + 1 < m.n && blockIdx.x >= m.first[t + 1]) ++t;
  const StatisticsMove& k = m.node[t];
  const int ch = static_cast<int>((blockIdx.x - m.first[t]) * blockDim.x + threadIdx.x);
  if (ch >= k.c) return;
  k.mean[ch] += k.momentum * (k.stats[ch] - k.mean[ch]);
  if (k.unbias > 0.f) k.var[ch] += k.momentum * (k.stats[2 * k.c + ch] * k.unbias - k.var[ch]);
}

__global__ void fold_kernel(float epsilon, const float* w, const float* bias, const float* gamma, const float* beta,
                            const float* mean, const float* var, float* fw, float* fb, int c, size_t per) {
  NNGRAPH_GRID_LOOP_T(size_t, i, per * c) {
    const size_t o = i / per;
    const float scale = gamma[o] * rsqrtf(var[o] + epsilon);
    fw[i] = w[i] * scale;
    if (i % per == 0) fb[o] = ((bias ? bias[o] : 0.f) - mean[o]) * scale + beta[o];
  }
}

unsigned channel_blocks(int c) { return static_cast<unsigned>((c + kThreads - 1) / kThreads); }

int batch_norm_chunks(int n, int c, int hw) {
  // Planes: enough blocks to fill the device (8 per multiprocessor).
  if (hw == 1) return row_chunks(n, c);
  return std::max(1, std::min({n, (8 * multiprocessors() + c - 1) / std::max(1, c), 1024}));
}

}  // namespace

size_t batch_norm_partial_floats(int n, int c, int hw) {
  const int chunks = batch_norm_chunks(n, c, hw);
  return 2 * static_cast<size_t>(c) * (hw == 1 ? std::max(chunks, resident_chunks_bound()) : chunks);
}

template <class T>
void batch_norm_forward(cudaStream_t s, const T* x, const float* gamma, const float* beta, const float* mean,
                        const float* var, float* stats, float* partial, float epsilon, const T* addend,
                        const NeuronDescriptor& nd, T* y, int y_ld, int n, int c, int hw) {
  if (partial && hw == 1) {
    bool done = false;
    with_neuron(nd, [&](auto neuron) {
      done = resident_forward(s, x, gamma, beta, stats, partial, epsilon, addend, neuron, y, y_ld, n, c);
    });
    if (done) return check_launch("batch_normalization");
  }
  if (partial) {
    const int chunks = batch_norm_chunks(n, c, hw);
    partial_sums<T>(s, MomentTerms<T>{x, hw}, partial, n, c, hw, chunks);
    moments_kernel<<<c, kThreads, 0, s>>>(x, partial, chunks, c, hw, static_cast<double>(n) * hw, epsilon, gamma,
                                          beta, stats);
  }
  const size_t count = static_cast<size_t>(n) * c * hw;
  with_neuron(nd, [&](auto neuron) {
    if (hw == 1)
      return row_pass<T>(s, NormalizeRows<T, decltype(neuron)>{x, addend, y, y_ld, c, gamma, beta, mean, var, stats,
                                                               epsilon, neuron},
                         n, c);
    with_index_type(count, [&](auto index) {
      using I = decltype(index);
      with_pack<T>(c, hw, packed(x) && packed(y) && packed(addend), [&](auto v) {
        constexpr int V = decltype(v)::value;
        normalize_kernel<V><<<blocks_for(count / V), kThreads, 0, s>>>(x, addend, y, static_cast<I>(count / V), c, hw,
                                                                      gamma, beta, mean, var, stats, epsilon, neuron);
      });
    });
  });
  check_launch("batch_normalization");
}

template <class T>
void batch_norm_gradient(cudaStream_t s, const T* x, const T* dy, const float* gamma, const float* beta,
                         float* stats, const NeuronDescriptor& neuron, float* partial, T* dx, float* dgamma,
                         float* dbeta, int dy_ld, int dx_ld, int n, int c, int hw) {
  const int chunks = batch_norm_chunks(n, c, hw);
  const float inv_count = static_cast<float>(1.0 / (static_cast<double>(n) * hw));
  const size_t count = static_cast<size_t>(n) * c * hw;
  with_through(neuron, [&](auto through) {
    if (hw == 1 && resident_gradient(s, x, dy, stats, through, partial, dx, dgamma, dbeta, dy_ld, dx_ld, n, c))
      return;
    GradientTerms<T, decltype(through)> terms{x, dy, gamma, beta, stats, c, through, dy_ld};
    // g goes through dx's memory where dx is dense and shares none with x or dy (the plan's never do).
    const auto apart = [&](const T* a, size_t values) { return dx + count <= a || a + values <= dx; };
    if (decltype(through)::kCostly && dx && dx_ld == c && apart(x, count) && apart(dy, count / c * dy_ld))
      terms.g_out = dx;
    partial_sums<T>(s, terms, partial, n, c, hw, chunks);
    gradient_totals_kernel<<<c, kThreads, 0, s>>>(partial, chunks, c, stats, dgamma, dbeta, inv_count);
    if (!dx) return;
    if (hw == 1) return row_pass<T>(s, InputGradientRows<T, decltype(through)>{terms, dx, dx_ld}, n, c);
    with_index_type(count, [&](auto index) {
      using I = decltype(index);
      with_pack<T>(c, hw, terms.aligned() && packed(dx), [&](auto v) {
        constexpr int V = decltype(v)::value;
        input_gradient_kernel<V><<<blocks_for(count / V), kThreads, 0, s>>>(terms, dx, static_cast<I>(count / V), hw);
      });
    });
  });
  check_launch("batch_normalization_gradient");
}

#define INSTANTIATE(T)                                                                                           \
  template void batch_norm_forward(cudaStream_t, const T*, const float*, const float*, const float*, const float*, \
                                   float*, float*, float, const T*, const NeuronDescriptor&, T*, int, int, int, int); \
  template void batch_norm_gradient(cudaStream_t, const T*, const T*, const float*, const float*, float*,          \
                                    const NeuronDescriptor&, float*, T*, float*, float*, int, int, int, int, int);
NNGRAPH_STORAGE_TYPES(INSTANTIATE)
#undef INSTANTIATE

void batch_norm_statistics(cudaStream_t s, const StatisticsMove* moves, size_t n) {
  for (size_t start = 0; start < n; start += kMovesPerLaunch) {
    Moves m{};
    m.n = static_cast<int>(std::min<size_t>(kMovesPerLaunch, n - start));
    for (int i = 0; i < m.n; ++i) {
      m.node[i] = moves[start + i];
      m.first[i + 1] = m.first[i] + channel_blocks(m.node[i].c);
    }
    statistics_kernel<<<m.first[m.n], kThreads, 0, s>>>(m);
  }
  check_launch("batch_normalization_statistics");
}

void batch_norm_fold(cudaStream_t s, float epsilon, const float* w, const float* bias, const float* gamma,
                     const float* beta, const float* mean, const float* var, float* folded_w, float* folded_bias, int c,
                     size_t per) {
  const size_t count = per * c;
  fold_kernel<<<blocks_for(count), kThreads, 0, s>>>(epsilon, w, bias, gamma, beta, mean, var, folded_w, folded_bias,
                                                     c, per);
  check_launch("batch_normalization_fold");
}

}  // namespace nngraph::cuda
