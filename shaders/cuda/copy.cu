// Copies and layout changes: rows added into rows, axes permuted, many blocks in one launch.
#include "common.cuh"
#include "kernels.cuh"

namespace nngraph::cuda {
namespace {

__global__ void add_rows_kernel(float* dst, int dst_ld, const float* src, int src_ld, int columns, size_t total) {
  NNGRAPH_GRID_LOOP(i, total) {
    const size_t r = i / columns, c = i % columns;
    dst[r * dst_ld + c] += src[r * src_ld + c];
  }
}

__global__ void permute_kernel(const float* in, float* out, int o1, int o2, size_t s0, size_t s1, size_t s2,
                               size_t total) {
  NNGRAPH_GRID_LOOP(i, total) {
    const size_t c = i % o2, b = (i / o2) % o1, a = i / (size_t(o2) * o1);
    out[i] = in[a * s0 + b * s1 + c * s2];
  }
}

struct Blocks {
  Block b[16];
};

__global__ void copy_blocks_kernel(Blocks blocks) {
  const Block& b = blocks.b[blockIdx.y];
  const size_t total = size_t(b.rows) * b.cols;
  if (b.rows == 1) {  // a plain span: no division per element
    NNGRAPH_GRID_LOOP(i, total) b.dst[i] = b.src ? b.src[i] : 0.f;
    return;
  }
  NNGRAPH_GRID_LOOP(i, total) {
    const size_t r = i / b.cols, c = i % b.cols;
    b.dst[r * b.dst_ld + c] = b.src ? b.src[r * b.src_ld + c] : 0.f;
  }
}

}  // namespace

void copy_blocks(const StepLaunch& l, const std::vector<Block>& blocks) {
  if (blocks.empty()) return;
  Blocks table{};
  size_t most = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    table.b[i] = blocks.at(i);
    most = std::max(most, size_t(blocks[i].rows) * blocks[i].cols);
  }
  launch_step(l, copy_blocks_kernel, dim3(blocks_for(most), static_cast<unsigned>(blocks.size())), kThreads, table);
  check_launch("copy");
}

void add_rows(cudaStream_t s, float* dst, int dst_ld, const float* src, int src_ld, int rows, int columns) {
  const size_t total = size_t(rows) * columns;
  add_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(dst, dst_ld, src, src_ld, columns, total);
  check_launch("copy_rows");
}

void permute(cudaStream_t s, const float* in, float* out, const int dims[3], const int perm[3]) {
  const size_t stride[3] = {size_t(dims[1]) * dims[2], size_t(dims[2]), 1};
  const size_t total = size_t(dims[0]) * dims[1] * dims[2];
  permute_kernel<<<blocks_for(total), kThreads, 0, s>>>(in, out, dims[perm[1]], dims[perm[2]], stride[perm[0]],
                                                        stride[perm[1]], stride[perm[2]], total);
  check_launch("permute");
}

}  // namespace nngraph::cuda
