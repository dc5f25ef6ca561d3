// The probe's convolution on Hopper's warpgroup instructions (sm_90a), included by
// bench/conv_mma_probe.cu after its Conv, Block, Pixel, tap_of, copy and normalize_chunk
// helpers. Each warpgroup's 64 rows × BN channels lie in wgmma's float32 registers; k blocks of
// 64 values (one tap's 64 channels) land by cp.async in the 128-byte swizzle wgmma reads from
// shared memory. With batch norm folded in, each warp takes its rows of A into registers
// (ldmatrix), normalizes them there, and wgmma reads A from registers: no write back, no extra
// barrier.
constexpr int WK = 64;
// Row r's 16-byte chunk c lies at chunk c ^ (r & 7) of its 128 bytes, the hardware's 128B swizzle
// on a base aligned to 1024 bytes.
__device__ inline int swz128(int row, int chunk) { return row * WK + ((chunk ^ (row & 7)) << 3); }
// A K-major operand in that swizzle: start >> 4, leading offset unused (1), 1024 bytes between
// groups of 8 rows, swizzle mode 1 (128B). Each k16 step adds 32 bytes (2) to the start.
__device__ inline unsigned long long smem_desc(const void* at) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(at));
  return static_cast<unsigned long long>((a & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ inline void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ inline void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// cp.async writes through the generic proxy; wgmma reads through the async one.
__device__ inline void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from touching the accumulators while wgmma may still write them.
template <int R>
__device__ inline void pin(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// d += A·Bᵀ over one k16 step: 64 rows of A and N of B, both K-major, by descriptor (or A from
// registers in mma.sync's fragment layout, a warp's 16 rows each).
__device__ inline void wgmma(float (&d)[32], unsigned long long a, unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(1));
}
__device__ inline void wgmma(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
__device__ inline void wgmma(float (&d)[64], unsigned long long a, unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1));
}
__device__ inline void wgmma(float (&d)[64], const unsigned (&a)[4], unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// (256 columns: shared-memory operands only.)
__device__ inline void wgmma(float (&d)[128], unsigned long long a, unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(1));
}
// Block kb's rows of A (row0, row0 + ROWS, ...) and of the filters, this thread's 16-byte chunk
// of each, into one stage.
template <int AR, int BR, int ROWS>
__device__ inline void load_block(const Conv& p, const Pixel (&own)[AR], int row0, int chunk, int kb, bf16* a, bf16* b, int n0) {
  const Block blk = block_of(p, kb * WK, chunk);
#pragma unroll
  for (int j = 0; j < AR; ++j) {
    const Tap t = tap_of(p, blk, own[j]);
    cp_async16(a + swz128(row0 + j * ROWS, chunk), t.in ? p.x + t.offset : p.x, t.in);
  }
#pragma unroll
  for (int j = 0; j < BR; ++j) {
    const int row = row0 + j * ROWS;
    cp_async16(b + swz128(row, chunk), p.filt + static_cast<size_t>(n0 + row) * p.kdim + kb * WK + chunk * 8, true);
  }
}

// The tile goes out through shared memory (the stages', every thread past them) in 16-byte
// pieces of rows; a thread's own pairs of values, stored straight from the fragments, were 4-byte
// writes a row apart. Threads that hold fragments (rows frow and frow + 8 of warp cwarp) write
// them; every thread of the block calls this and stores pieces.
template <int BM, int BN, int THREADS, int WARPS, bool EPI, int R>
__device__ inline void store_tile(const Conv& p, const float (&d)[R], bool holds, int frow, int cwarp, int lane, bf16* smem,
                                  int m0, int n0) {
  constexpr int TS = BN + 8;  // a tile row's stride: the fragments' pairs land in distinct banks
  const int tid = threadIdx.x, q = lane & 3;
  bf16* tile = smem;
  float2* red = reinterpret_cast<float2*>(smem + BM * TS);  // [WARPS][BN]
  __syncthreads();  // every warpgroup is done reading the stages
  if (holds)
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      float2 s = {0.f, 0.f}, sq = {0.f, 0.f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        *reinterpret_cast<__nv_bfloat162*>(tile + (frow + 8 * h) * TS + j * 8 + 2 * q) = v;
        if (m0 + frow + 8 * h >= p.m) continue;
        const float2 f = __bfloat1622float2(v);
        s.x += f.x, s.y += f.y, sq.x += f.x * f.x, sq.y += f.y * f.y;
      }
      if constexpr (EPI) {  // the statistics of what is stored: the warp's 16 rows, then the block's
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
          s.x += __shfl_xor_sync(0xffffffffu, s.x, o), s.y += __shfl_xor_sync(0xffffffffu, s.y, o);
          sq.x += __shfl_xor_sync(0xffffffffu, sq.x, o), sq.y += __shfl_xor_sync(0xffffffffu, sq.y, o);
        }
        if (lane < 4) red[cwarp * BN + j * 8 + 2 * q] = {s.x, sq.x}, red[cwarp * BN + j * 8 + 2 * q + 1] = {s.y, sq.y};
      }
    }
  __syncthreads();
  for (int i = tid; i < BM * BN / 8; i += THREADS) {
    const int row = i / (BN / 8), piece = i - row * (BN / 8);
    if (m0 + row < p.m)
      *reinterpret_cast<uint4*>(p.y + static_cast<size_t>(m0 + row) * p.k + n0 + piece * 8) =
          *reinterpret_cast<const uint4*>(tile + row * TS + piece * 8);
  }
  if constexpr (EPI)
    for (int col = tid; col < BN; col += THREADS) {
      float2 total = {0.f, 0.f};
#pragma unroll
      for (int w = 0; w < WARPS; ++w) total.x += red[w * BN + col].x, total.y += red[w * BN + col].y;
      p.partial[static_cast<size_t>(blockIdx.x) * p.k + n0 + col] = total;
    }
}

// The dynamic shared memory's first byte at a 1024-byte boundary, as the 128B swizzle needs.
__device__ inline unsigned char* aligned_smem(unsigned char* raw) {
  return raw + ((1024 - (static_cast<unsigned>(__cvta_generic_to_shared(raw)) & 1023)) & 1023);
}

// WGS warpgroups, each 64 output pixels × BN channels; ST stages of k blocks, LAG blocks' wgmma
// left in flight while the next is issued (1), or each waited for so that loads run ahead by one
// stage more (0). With A in registers (PRO), ptxas serializes the wgmmas at lag 1 (its warning
// C7513), though each parity keeps its own A registers.
template <int WGS, int BN, int ST, int LAG, bool PRO, bool EPI>
__global__ void __launch_bounds__(WGS * 128) wg_conv_kernel(Conv p) {
  constexpr int BM = 64 * WGS, THREADS = WGS * 128, ROWS = THREADS / 8, AR = BM / ROWS, BR = BN / ROWS, R = BN / 2;
  constexpr int AHEAD = ST - 1 - LAG;
  static_assert(AR * ROWS == BM && BR * ROWS == BN && AHEAD >= 2 && (LAG == 0 || LAG == 1));
  extern __shared__ unsigned char smem_raw[];
  bf16* sa = reinterpret_cast<bf16*>(aligned_smem(smem_raw));
  bf16* sb = sa + ST * BM * WK;
  float2* snorm = reinterpret_cast<float2*>(sb + ST * BN * WK);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, chunk = tid & 7;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, kblocks = p.kdim / WK;
  if constexpr (PRO)
    for (int i = tid; i < p.c; i += THREADS) snorm[i] = p.norm[i];
  Pixel own[AR];
#pragma unroll
  for (int j = 0; j < AR; ++j) own[j] = pixel_of(p, m0 + (tid >> 3) + j * ROWS);
  auto load = [&](int kb, int stage) {
    load_block<AR, BR, ROWS>(p, own, tid >> 3, chunk, kb, sa + stage * BM * WK, sb + stage * BN * WK, n0);
  };
  // The rows this thread holds in A's register fragments: g and g + 8 of its warp's 16.
  const int frow = wg * 64 + (warp & 3) * 16 + (lane >> 2), q = lane & 3;
  const Pixel fp[2] = {pixel_of(p, m0 + frow), pixel_of(p, m0 + frow + 8)};
  unsigned afr[2][4][4];
  float d[R] = {};
  auto step = [&](int kb, auto parity) {
    cp_wait<AHEAD - 1>();
    proxy_fence();
    __syncthreads();  // block kb landed everywhere; every warpgroup's wgmma of kb - 1 - LAG is done
    if (kb + AHEAD < kblocks) load(kb + AHEAD, (kb + AHEAD) % ST);
    cp_commit();
    const int stage = kb % ST;
    const bf16* A = sa + stage * BM * WK;
    const unsigned long long bdesc = smem_desc(sb + stage * BN * WK);
    if constexpr (PRO) {  // the previous layer's batch norm + relu, zero outside the image
      constexpr int P = decltype(parity)::value;
      const Block b = block_of(p, kb * WK, 0);
      const bool in[2] = {tap_of(p, b, fp[0]).in, tap_of(p, b, fp[1]).in};
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        ldmatrix4(afr[P][kk], A + swz128(wg * 64 + (warp & 3) * 16 + (lane & 15), kk * 2 + (lane >> 4)));
#pragma unroll
        for (int r = 0; r < 4; ++r) {  // r: row g or g + 8 (r & 1), channels +0 or +8 (r >> 1)
          const int ch = b.c + kk * 16 + (r >> 1) * 8 + 2 * q;
          const float2 f = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&afr[P][kk][r]));
          const float2 lo = snorm[ch], hi = snorm[ch + 1];
          // (Selecting per value: a select of the packed pair made ptxas serialize the wgmmas.)
          const bool keep = in[r & 1];
          const __nv_bfloat162 v = __floats2bfloat162_rn(keep ? fmaxf(fmaf(f.x, lo.x, lo.y), 0.f) : 0.f,
                                                         keep ? fmaxf(fmaf(f.y, hi.x, hi.y), 0.f) : 0.f);
          afr[P][kk][r] = *reinterpret_cast<const unsigned*>(&v);
        }
      }
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) wgmma(d, afr[P][kk], bdesc + 2 * kk);
    } else {
      const unsigned long long adesc = smem_desc(A + wg * 64 * WK);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) wgmma(d, adesc + 2 * kk, bdesc + 2 * kk);
    }
    wg_commit();
    wg_wait<LAG>();  // the previous block's wgmma, and its A registers, are done
  };
  if constexpr (PRO) __syncthreads();  // the table
#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    if (s < kblocks) load(s, s);
    cp_commit();
  }
  for (int kb = 0; kb < kblocks; kb += 2) {
    step(kb, std::integral_constant<int, 0>{});
    if (kb + 1 < kblocks) step(kb + 1, std::integral_constant<int, 1>{});
  }
  wg_wait<0>();
  pin(d);
  cp_wait<0>();
  store_tile<BM, BN, THREADS, WGS * 4, EPI>(p, d, true, frow, warp, lane, sa, m0, n0);
}

// mbarriers in shared memory: arrive (release), and wait for a phase's parity (acquire).
__device__ inline void bar_init(unsigned long long* b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(b))), "r"(count)
               : "memory");
}
__device__ inline void bar_arrive(unsigned long long* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(b))) : "memory");
}
__device__ inline void bar_wait(unsigned long long* b, unsigned parity) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(b));
  unsigned done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
}

// The same convolution with the work split by warpgroup: the first loads (and with PRO normalizes
// in shared memory, its own chunks) each k block, the other WGS only multiply, each its 64 rows.
// Stages pass between them by mbarriers (full: the loader's 128 threads; empty: every
// multiplying thread), so no block-wide barrier stands between k blocks, and wgmma reads both
// operands from shared memory with one block left in flight.
template <int WGS, int BN, int ST, bool PRO, bool EPI>
__global__ void __launch_bounds__((WGS + 1) * 128) ws_conv_kernel(Conv p) {
  constexpr int BM = 64 * WGS, THREADS = (WGS + 1) * 128, AR = BM / 16, BR = BN / 16, R = BN / 2;
  constexpr int AHEAD = ST - 2;  // the loader's copy groups in flight; more could deadlock
  static_assert(AHEAD >= 1);
  extern __shared__ unsigned char smem_raw[];
  bf16* sa = reinterpret_cast<bf16*>(aligned_smem(smem_raw));
  bf16* sb = sa + ST * BM * WK;
  float2* snorm = reinterpret_cast<float2*>(sb + ST * BN * WK);
  unsigned long long* full = reinterpret_cast<unsigned long long*>(snorm + (PRO ? p.c : 0));
  unsigned long long* empty = full + ST;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, kblocks = p.kdim / WK;
  if (tid == 0)
    for (int s = 0; s < ST; ++s) bar_init(&full[s], 128), bar_init(&empty[s], WGS * 128);
  if constexpr (PRO)
    for (int i = tid; i < p.c; i += THREADS) snorm[i] = p.norm[i];
  __syncthreads();
  float d[R] = {};
  const int frow = (wg - 1) * 64 + (warp & 3) * 16 + (lane >> 2);
  if (wg == 0) {
    const int chunk = tid & 7, row0 = tid >> 3;
    Pixel own[AR];
#pragma unroll
    for (int j = 0; j < AR; ++j) own[j] = pixel_of(p, m0 + row0 + j * 16);
    for (int it = 0; it < kblocks + AHEAD; ++it) {
      if (it < kblocks) {
        const int s = it % ST;
        bar_wait(&empty[s], ((it / ST) & 1) ^ 1);  // the block ST before has been multiplied
        load_block<AR, BR, 16>(p, own, row0, chunk, it, sa + s * BM * WK, sb + s * BN * WK, n0);
      }
      cp_commit();
      if (it < AHEAD) continue;
      const int kb = it - AHEAD, s = kb % ST;
      cp_wait<AHEAD>();  // this thread's copies of block kb have landed
      if constexpr (PRO) {  // the previous layer's batch norm + relu on them, zero outside the image
        const Block blk = block_of(p, kb * WK, chunk);
#pragma unroll
        for (int j = 0; j < AR; ++j) {
          if (!tap_of(p, blk, own[j]).in) continue;
          normalize_chunk(reinterpret_cast<uint4*>(sa + s * BM * WK + swz128(row0 + j * 16, chunk)), snorm + blk.c);
        }
      }
      proxy_fence();
      bar_arrive(&full[s]);
    }
  } else {
    for (int kb = 0; kb < kblocks; ++kb) {
      const int s = kb % ST;
      bar_wait(&full[s], (kb / ST) & 1);
      const unsigned long long adesc = smem_desc(sa + s * BM * WK + (wg - 1) * 64 * WK), bdesc = smem_desc(sb + s * BN * WK);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) wgmma(d, adesc + 2 * kk, bdesc + 2 * kk);
      wg_commit();
      wg_wait<1>();
      if (kb > 0) bar_arrive(&empty[(kb - 1) % ST]);  // block kb - 1's wgmma is done
    }
    wg_wait<0>();
    pin(d);
  }
  store_tile<BM, BN, THREADS, WGS * 4, EPI>(p, d, wg > 0, frow, warp - 4, lane, sa, m0, n0);
}
