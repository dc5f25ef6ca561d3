// The cuda runtime under load: out of memory, captured steps' scratch, side-by-side work and
// uploads against queued reads (skipped without a GPU).
#ifdef NNGRAPH_HAVE_CUDA
#include "cuda_vs_cpu.h"

using namespace nngraph;
using nngraph::testing_cuda::CudaVsCpu;

TEST_F(CudaVsCpu, OutOfMemoryRaisesAndTheDeviceStaysUsable) {
  EXPECT_THROW(gpu().allocate(size_t(1) << 50), OutOfMemory);
  auto b = gpu().allocate(64);
  EXPECT_TRUE(b);
}
// A captured step's scratch: allocated outside the graph (no allocation nodes, no graph memory),
// reused within the step once freed, valid for every replay, kept while a buffer outlives the step.
TEST_F(CudaVsCpu, CapturedScratchHoldsNoGraphMemory) {
  const size_t n = 4096, bytes = n * sizeof(float);
  auto src = on_gpu(random(n)), dst = gpu().allocate(bytes);
  void *first = nullptr, *second = nullptr;
  std::shared_ptr<Buffer> kept;
  auto step = gpu().capture([&] {
    auto a = gpu().allocate(bytes);
    first = a->data();
    gpu().copy(a->data(), src->data(), bytes);
    auto b = gpu().allocate(bytes);  // a is busy: another block
    gpu().copy(b->data(), a->data(), bytes);
    a.reset();
    auto c = gpu().allocate(bytes / 2);  // a's block, free again
    second = c->data();
    gpu().copy(c->data(), b->data(), bytes / 2);
    gpu().copy(dst->data(), c->data(), bytes / 2);
    gpu().copy(static_cast<char*>(dst->data()) + bytes / 2, static_cast<char*>(b->data()) + bytes / 2, bytes / 2);
    kept = gpu().allocate(16);  // outlives the step
  });
  EXPECT_EQ(first, second);
  for (int run = 0; run < 2; ++run) {
    const auto v = random(n);
    gpu().copy_from_host(src->data(), v.data(), bytes);
    gpu().replay(step, {});
    near(host(dst), v, 0.f);
  }
  uint64_t graph_bytes = 1;
  ASSERT_EQ(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &graph_bytes), cudaSuccess);
  EXPECT_EQ(graph_bytes, 0u);
  step.reset();
  kept.reset();  // freed now, with no step left to own it
  gpu().synchronize();
  EXPECT_NE(gpu().allocate(64), nullptr);
}

// One launch of copies: spans whole 16-byte packs apart (a thread per pack) or not (a float
// at a time; a tail past the last pack), a zero fill, and rows between strided images.
TEST_F(CudaVsCpu, CopyBlocksCopiesSpansFillsAndRows) {
  const int n = 4099;
  const auto v = random(n);
  auto src = on_gpu(v), dst = gpu().allocate(3 * n * sizeof(float));
  const float* from = static_cast<const float*>(src->data());
  float* to = static_cast<float*>(dst->data());
  gpu().copy_from_host(to, std::vector<float>(3 * n, 7.f).data(), 3 * n * sizeof(float));
  cuda::copy_blocks(gpu().stream(), {{from, 1026, to, 1026, 1, 1026},             // aligned, a tail of 2
                                     {from + 1, 1025, to + 1027, 1025, 1, 1025},  // unaligned
                                     {nullptr, 1000, to + n, 1000, 1, 1000},      // zero fill
                                     {from, 100, to + 2 * n, 50, 3, 40}});         // 3 rows of 40
  const auto got = host(dst);
  for (int i = 0; i < 1026; ++i) ASSERT_EQ(got[i], v[i]) << i;
  for (int i = 0; i < 1025; ++i) ASSERT_EQ(got[1027 + i], v[1 + i]) << i;
  ASSERT_EQ(got[1026], 7.f);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(got[n + i], 0.f) << i;
  ASSERT_EQ(got[n + 1000], 7.f);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 50; ++c) ASSERT_EQ(got[2 * n + r * 50 + c], c < 40 ? v[r * 100 + c] : 7.f) << r << " " << c;
}

// Side by side in a capture: both works see what came before, the work after sees both, and
// scratch one frees is not handed to the other (it may still be read); one after the other
// where the works are long or the shared workspace cannot hold both.
TEST_F(CudaVsCpu, SideBySideWorksShareNoScratch) {
  const size_t n = 4096, bytes = n * sizeof(float);
  auto src = on_gpu(random(n)), a = gpu().allocate(bytes), b = gpu().allocate(bytes), sum = gpu().allocate(bytes);
  void *freed = nullptr, *beside = nullptr, *after = nullptr, *in_turn = nullptr, *no_room = nullptr;
  void *long_first = nullptr, *roomy_first = nullptr;
  auto step = gpu().capture([&] {
    auto staged = gpu().allocate(bytes);
    gpu().copy(staged->data(), src->data(), bytes);
    gpu().side_by_side(
        [&] {
          auto s = gpu().allocate(bytes);
          freed = s->data();
          gpu().copy(s->data(), staged->data(), bytes);
          gpu().copy(a->data(), s->data(), bytes);
        },
        [&] {
          auto s = gpu().allocate(bytes);
          beside = s->data();
          gpu().copy(s->data(), staged->data(), bytes);
          gpu().copy(b->data(), s->data(), bytes);
        },
        1e3, 0, 0);
    auto s = gpu().allocate(bytes);  // both blocks are free again
    after = s->data();
    gpu().copy_all({{sum->data(), a->data(), bytes / 2}, {static_cast<char*>(sum->data()) + bytes / 2,
                                                           static_cast<char*>(b->data()) + bytes / 2, bytes / 2}});
    s.reset();
    gpu().side_by_side([&] { long_first = gpu().allocate(bytes)->data(); },
                       [&] { in_turn = gpu().allocate(bytes)->data(); }, 1e15, 0, 0);
    gpu().side_by_side([&] { roomy_first = gpu().allocate(bytes)->data(); },
                       [&] { no_room = gpu().allocate(bytes)->data(); }, 1e3, 0, size_t(1) << 50);
  });
  EXPECT_NE(freed, beside);
  EXPECT_TRUE(after == beside || after == freed);
  EXPECT_EQ(long_first, in_turn);
  EXPECT_EQ(roomy_first, no_room);
  for (int run = 0; run < 2; ++run) {
    const auto v = random(n);
    gpu().copy_from_host(src->data(), v.data(), bytes);
    gpu().replay(step, {});
    near(host(a), v, 0.f);
    near(host(b), v, 0.f);
    near(host(sum), v, 0.f);
  }
}

// An upload overlaps the work queued before it but never writes memory that work still reads.
TEST_F(CudaVsCpu, UploadsLeaveQueuedReadsAlone) {
  const size_t n = 1 << 16, bytes = n * sizeof(float);
  const auto before = random(n), later = random(n);
  for (int round = 0; round < 4; ++round) {
    auto queued = on_gpu(before), out = gpu().allocate(bytes);
    gpu().synchronize();
    cuda::hold(gpu().stream(), 2000);  // the read below waits behind this
    gpu().copy(out->data(), queued->data(), bytes);
    queued.reset();  // freed after the read, in the stream's order
    auto uploaded = gpu().upload(bytes, [&](void* p) { std::memcpy(p, later.data(), bytes); });
    near(host(out), before, 0.f);
    near(host(uploaded), later, 0.f);
  }
}
#endif  // NNGRAPH_HAVE_CUDA
