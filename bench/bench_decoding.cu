// bench_decoding: the decoding regime (a few query rows per head against a long KV cache), where
// attention is memory-bound and the figure that matters is the bandwidth of reading K and V.
//
//   bench_decoding --out results.csv [--quick] [--parts 1,2] [--bh 1024,32] [--dtypes bf16,fp32]
//                  [--impls lab6,lab5] [--budget-s 120] [--max-reps 20]
//                  [--groups 1,8] [--pages 16,64,256] [--splits auto,16,33] [--nks 4096,65536]
//                  [--nqs 1,4,8] [--l2 cold|warm] [--kv-gaps separate,0,65536]
//
// Part 1 (lab 6 part 1, a contiguous cache): d = 128, Nq = 1, non-causal, B * H in {32 * 32,
// 1 * 32} (H = 32), Nk in {1k, 2k, ..., 128k} (quick: 4k and 32k). A configuration whose K and V
// do not fit in 60% of the free device memory is skipped (fp32 at B * H = 1024 and Nk = 128k
// needs 128 GiB). --bh, --dtypes and --impls choose among part 1's rows. Implementations:
//   lab6   course::lab6::split_kv_forward, the library's own split count
//   lab5   course::lab5::flash_attention_forward (bf16 only, where built): no split, one CTA per
//          128 query rows of each head (64 on a GPU with 99 KB of shared memory a block),
//          i.e. B * H CTAs that each read their whole cache
// Part 2 (lab 6 part 2, decoding as a server runs it): bf16, d = 128, Nk in {4k, ..., 128k}
// (quick: 4k and 32k), two shapes:
//   group 1: B = 1, H_q = H_kv = 32, Nq = 1 (part 1's B * H = 32, for the comparison with it)
//   group 8: B = 4, H_q = 32, H_kv = 4, Nq in {1, 4, 8}, bottom-right causal when Nq > 1
//            (a 32-head model with 8 query heads per KV head, 4 sequences in flight)
// K and V are drawn once per (shape, Nk) as a contiguous [B, H_kv, Nk, d] cache, then copied
// into a pool of pages of 16, 64 and 256 keys whose order is a seeded shuffle of the pool, and
// timed with course::lab6::paged_decode (impl lab6:paged, layout "shuffled"). The baselines read
// the same keys in order: paged_decode on pages of 256 in pool order (layout "in-order"), at every
// Nq, which is what paging's cost is read against; and at Nq = 1 part 1's split_kv_forward on the
// contiguous cache, the group's query heads as its Nq rows (impl lab6, layout "contiguous"; at
// Nq > 1 part 1 cannot mask each packed head by its own row). K/V bytes count the H_kv heads once: 2 * B * H_kv * Nk * d * 2. --groups and
// --pages choose among part 2's shapes and page sizes. --splits times each paged row, and each of
// part 1's lab6 rows, once per split count listed ("auto", the default, is the library's own
// choice, choose_paged_splits' or choose_num_splits'; a number forces it, and the row's `how`
// says so): the way to see what a split heuristic gives up at a shape. --nks replaces both parts'
// lists of Nk (with --quick too), and --nqs group 8's Nq: one shape alone, as tools/profile runs
// it under Nsight Compute. --kv-gaps times each of part 1's rows once per placement of K and V:
// "separate" (the default) allocates them apart, a number of bytes puts them in one allocation
// with V that far after K's end (`how` says "placement: V <n> bytes after K"): the way to see
// whether a kernel's time depends on where its K and V lie in memory.
// Method (both parts):
//   * GB/s = K/V bytes / time (Q, O and the workspace are less than 0.1% of it at these sizes).
//   * copy GB/s: a device-to-device cudaMemcpyAsync of 4 GiB in the same process, counted as
//     bytes read + bytes written (what a copy moves through HBM), median of 10. `fraction` is
//     GB/s / copy GB/s.
//   * time: one call that is checked (max |O - O_fp64| over the Nq rows of head (0, 0), against
//     reference/gpu/attention_fp64 on the contiguous K and V that the pages were filled from), one
//     warm-up that sizes the repetitions (reps = clamp(300 ms / t, 3, max-reps)), then reps calls
//     each between its own cudaEvent pair, all queued behind a kernel that holds the GPU until the
//     host has queued them (GPU time only: event_timing.hpp); the median is reported. A row whose
//     check fails is still timed and says "wrong" (or "nonfinite") in its status.
//   * the L2 (column l2): "cold" (the default, --l2 cold) reads a buffer of twice the L2's size
//     before each timed call, outside its events, as a decoding step finds a layer's cache after
//     the rest of the model ran; "warm" (--l2 warm) times the calls back to back, so that a cache
//     of up to a few times the L2's size is partly read from L2.
// Inputs come from course::fill_normal with fixed seeds (part 2: Q 20, K 21, V 22 over the
// flat index of [B, H, N, d]), so that bench_torch_decoding.py can draw the same values.
// Each row is written and flushed as soon as it is measured.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_fp64.hpp"  // reference/gpu/
#include "cli.hpp"
#include "event_timing.hpp"
#include "row_check.hpp"
#include "tolerances.hpp"       // grader/common: the sanity limit of a benchmark row
#include "course/lab6_decoding.hpp"
#include "course/lab6_paged.hpp"
#if COURSE_HAVE_LAB5
#include "course/lab5_tensor_core.hpp"
#endif

namespace {

using course::check_cuda;
using course::DeviceBuffer;

constexpr int kD = 128;
constexpr int kHeads = 32;
constexpr std::uint64_t kSeedQ = 20, kSeedK = 21, kSeedV = 22;  // part 2; bench_torch_decoding.py uses the same

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Device-to-device copy bandwidth, bytes read + written per second, in GB/s.
double copy_gbps(cudaStream_t stream) {
  const size_t bytes = size_t(4) << 30;
  DeviceBuffer a(bytes), b(bytes);
  check_cuda(cudaMemsetAsync(a.get(), 1, bytes, stream), "memset");
  auto call = [&] { check_cuda(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream), "copy"); };
  call();
  const float ms = bench::time_ms(call, stream, 10);
  return 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
}

int sm_count() {
  int sms = 0, dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
  return sms;
}

// One line of the CSV: what was run (the first group of fields), then what was measured.
struct Row {
  std::string impl, dtype = "bf16";
  int part = 1, B = 1, H_q = 1, H_kv = 1, nq = 1, nk = 0, page_size = 0;  // page_size 0: no pages
  bool causal = false;
  std::string layout = "contiguous";  // contiguous, shuffled (pages) or in-order (pages)
  std::string how;                    // a note on how the row was run, no commas
  size_t kv_bytes = 0;
  int splits = 1, reps = 0;
  double ms = NAN, err = NAN;
  std::string status = "ok";
  std::string l2;  // how the L2 was left before each timed call: cold or warm
};

const char* kColumns =
    "impl,dtype,BH,d,Nq,Nk,splits,ms,kv_bytes,gbps,copy_gbps,fraction,status,max_abs_err,reps,"
    "part,B,H_q,H_kv,causal,page_size,layout,how,l2";

void write_row(FILE* csv, const Row& r, double copy) {
  const double gbps = double(r.kv_bytes) / (r.ms * 1e-3) / 1e9;
  std::fprintf(csv, "%s,%s,%d,%d,%d,%d,%d,%.6g,%zu,%.6g,%.6g,%.4f,%s,%.3g,%d,%d,%d,%d,%d,%d,%d,%s,%s,%s\n",
               r.impl.c_str(), r.dtype.c_str(), r.B * r.H_q, kD, r.nq, r.nk, r.splits, r.ms, r.kv_bytes, gbps, copy,
               gbps / copy, r.status.c_str(), r.err, r.reps, r.part, r.B, r.H_q, r.H_kv, int(r.causal), r.page_size,
               r.layout.c_str(), r.how.c_str(), r.l2.c_str());
  std::fflush(csv);
  std::printf("%-10s %s B=%-2d Hq=%-2d Hkv=%-2d Nq=%d Nk=%6d page=%3d %-10s splits=%3d  %8.3f ms  %7.0f GB/s  "
              "%5.1f%% of copy  err %.2e  %s\n",
              r.impl.c_str(), r.dtype.c_str(), r.B, r.H_q, r.H_kv, r.nq, r.nk, r.page_size, r.layout.c_str(), r.splits,
              r.ms, gbps, 100 * gbps / copy, r.err, r.status.c_str());
  std::fflush(stdout);
}

// Max |O - O_fp64| over the nq rows of head (0, 0): Q's first nq rows against the first nk rows
// of K and V (contiguous), O's first nq rows. NaN where O is not finite.
double head0_error(const void* q, const void* k, const void* v, const void* o, bool bf16, int nq, int nk, bool causal,
                   cudaStream_t stream) {
  const course::DType dt = bf16 ? course::DType::bf16 : course::DType::fp32;
  DeviceBuffer o64(size_t(nq) * kD * 8), lse64(size_t(nq) * 8);
  course::reference::gpu::attention_fp64(q, k, v, dt, 1, 1, nq, nk, kD, causal, 0.0, static_cast<double*>(o64.get()),
                                         static_cast<double*>(lse64.get()), stream);
  check_cuda(cudaStreamSynchronize(stream), "checked call");
  std::vector<double> ref(size_t(nq) * kD);
  check_cuda(cudaMemcpy(ref.data(), o64.get(), ref.size() * 8, cudaMemcpyDeviceToHost), "memcpy");
  const std::vector<float> got = bench::download_as_float(o, ref.size(), bf16, stream);
  double err = 0;
  for (size_t i = 0; i < ref.size(); ++i) err = std::isfinite(got[i]) ? std::max(err, std::fabs(got[i] - ref[i])) : NAN;
  return err;
}

// How each row is timed: at most max_reps calls, and before each one (outside its events) what
// before_each does: evict the L2 ("cold", the default), or nothing ("warm").
struct Timing {
  int max_reps = 20;
  std::string l2 = "cold";
  std::function<void()> before_each;
};

// The measurement of one row: one checked call (check() gives its error), then the timed calls.
void time_checked(Row& r, const std::function<void()>& call, const std::function<double()>& check,
                  cudaStream_t stream, const Timing& timing) {
  call();
  r.err = check();
  r.status = bench::error_status(r.err, r.dtype);
  r.ms = bench::sized_median_ms(call, stream, timing.max_reps, r.reps, timing.before_each);
}

// Runs body(r) and turns an exception into the row's status. False when the CUDA context is lost
// (nothing more can be measured in this process).
bool run_row(Row& r, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    r.status = std::string("error:") + e.what();
    for (char& ch : r.status)
      if (ch == ',' || ch == '\n') ch = ' ';
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::fprintf(stderr, "CUDA context lost: %s\n", e.what());
      return false;
    }
  }
  return true;
}

// The reasons not to measure a row: the time budget, or K and V (needed `copies` times over) that
// do not fit in 60% of the free memory. Empty when it can be measured.
std::string skip_reason(size_t kv_bytes, int copies, double elapsed_s, double budget_s) {
  size_t free_b = 0, total_b = 0;
  check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  if (elapsed_s > budget_s) return "skipped:time budget spent";
  if (kv_bytes * copies > free_b * 6 / 10) return "skipped:K and V do not fit";
  return "";
}

// Part 1's split_kv_forward on a contiguous cache: Q [B, H, nq, d], K and V [B, H, nk, d].
std::function<void()> part1_call(const void* q, const void* k, const void* v, void* o, float* lse, course::DType dt,
                                 const course::lab6::DecodeShape& shape, int splits, DeviceBuffer& workspace,
                                 cudaStream_t stream) {
  return [=, &workspace] {
    course::lab6::DecodeOptions opt;
    opt.num_splits = splits;
    opt.workspace = workspace.get();
    opt.workspace_bytes = workspace.bytes();
    opt.stream = stream;
    course::lab6::split_kv_forward(q, k, v, o, lse, dt, shape, opt);
  };
}

// K and V of `bytes` each: two allocations (gap < 0, as a program usually has them), or one
// allocation with V starting `gap` bytes after K's end (--kv-gaps: where V lies relative to K).
struct KvBuffers {
  std::unique_ptr<DeviceBuffer> first, second;
  void* k = nullptr;
  void* v = nullptr;
};

KvBuffers make_kv(size_t bytes, long long gap) {
  KvBuffers kv;
  if (gap < 0) {
    kv.first = std::make_unique<DeviceBuffer>(bytes);
    kv.second = std::make_unique<DeviceBuffer>(bytes);
    kv.k = kv.first->get(), kv.v = kv.second->get();
  } else {
    kv.first = std::make_unique<DeviceBuffer>(2 * bytes + size_t(gap));
    kv.k = kv.first->get(), kv.v = static_cast<char*>(kv.first->get()) + bytes + gap;
  }
  return kv;
}

// The `how` of a part 1 row: lab 5's lack of a split or a forced split count, then K and V's
// placement, joined by "; " (a CSV field: no commas).
std::string how_of(const std::string& impl, int forced_splits, long long gap) {
  std::string how = impl == "lab5" ? "no split" : forced_splits > 0 ? "split count forced" : "";
  if (gap >= 0) how += std::string(how.empty() ? "" : "; ") + "placement: V " + std::to_string(gap) + " bytes after K";
  return how;
}

// ---------------------------------------------------------------------------------------------
// Part 1: Nq = 1, no grouping, a contiguous cache; lab 6 part 1 against lab 5 without splits.

bool run_part1(FILE* csv, cudaStream_t stream, double copy, const std::vector<int>& nks, const std::string& bh_list,
               const std::vector<std::string>& dtypes, const std::vector<std::string>& impls, const std::vector<int>& splits,
               const std::vector<long long>& kv_gaps, const Timing& timing, const std::function<double()>& elapsed_s,
               double budget_s) {
  for (const std::string& dname : dtypes) {
    const bool bf16 = dname == "bf16";
    const size_t elem = bf16 ? 2 : 4;
    const course::DType dt = bf16 ? course::DType::bf16 : course::DType::fp32;
    for (const std::string& bh_s : bench::split_list(bh_list)) {
      const int bh = std::stoi(bh_s);
      const int B = std::max(1, bh / kHeads), H = bh / B;
      for (int nk : nks) {
        const size_t kv_elems = size_t(B) * H * nk * kD;
        // One lab6 row per split count listed (0: choose_num_splits'), then lab5's one; each once
        // per placement of K and V (-1: two allocations).
        struct Run {
          std::string impl;
          int forced_splits;
          long long gap;
        };
        std::vector<Run> runs;
        for (long long gap : kv_gaps) {
          for (int s : splits) runs.push_back({"lab6", s, gap});
          runs.push_back({"lab5", 1, gap});
        }
        for (const auto& [impl, forced_splits, gap] : runs) {
          if (!has(impls, impl)) continue;
#if !COURSE_HAVE_LAB5
          if (impl == "lab5") continue;
#endif
          if (impl == "lab5" && !bf16) continue;  // lab 5 is bf16/fp16 only
          Row r;
          r.impl = impl, r.dtype = dname, r.B = B, r.H_q = r.H_kv = H, r.nk = nk, r.l2 = timing.l2;
          r.kv_bytes = 2 * kv_elems * elem;
          r.how = how_of(impl, forced_splits, gap);
          r.status = skip_reason(r.kv_bytes, 1, elapsed_s(), budget_s);
          if (r.status.empty() && !run_row(r, [&] {
                DeviceBuffer q(size_t(bh) * kD * elem), o(size_t(bh) * kD * elem), lse(size_t(bh) * 4);
                const KvBuffers kv = make_kv(kv_elems * elem, gap);
                uint64_t seed = 7;
                for (void* b : {q.get(), kv.k, kv.v}) {
                  const int64_t n = int64_t(b == q.get() ? size_t(bh) * kD : kv_elems);
                  if (bf16) course::fill_normal(static_cast<__nv_bfloat16*>(b), n, ++seed, stream);
                  else course::fill_normal(static_cast<float*>(b), n, ++seed, stream);
                }
                float* lse_p = static_cast<float*>(lse.get());
                std::function<void()> call;
                std::unique_ptr<DeviceBuffer> workspace;
                if (impl == "lab6") {
                  const course::lab6::DecodeShape shape{B, H, 1, nk, kD};
                  r.splits = forced_splits > 0 ? forced_splits : course::lab6::choose_num_splits(shape, dt, sm_count());
                  workspace = std::make_unique<DeviceBuffer>(course::lab6::split_kv_workspace_bytes(shape, dt, r.splits));
                  call = part1_call(q.get(), kv.k, kv.v, o.get(), lse_p, dt, shape, r.splits, *workspace, stream);
                } else {
#if COURSE_HAVE_LAB5
                  call = [&] {
                    course::lab5::ForwardOptions opt;
                    opt.stream = stream;
                    course::lab5::flash_attention_forward(q.get(), kv.k, kv.v, o.get(), lse_p, course::DType::bf16,
                                                          {B, H, 1, nk, kD}, opt);
                  };
#endif
                }
                time_checked(r, call, [&] { return head0_error(q.get(), kv.k, kv.v, o.get(), bf16, 1, nk, false, stream); },
                             stream, timing);
              }))
            return false;
          if (r.status.empty()) r.status = "ok";
          write_row(csv, r, copy);
        }
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Part 2: paged, grouped decoding.

// A paged cache on the device, filled from a contiguous [B, H_kv, nk, d] bf16 cache: sequence b's
// page j (keys j * page_size ..) goes to pool page table[b][j]. `shuffled`: the pool's pages in a
// seeded random order (as a server's free list hands them out after a while); otherwise in order.
struct PagedCopy {
  course::lab6::PagedShape shape;
  std::unique_ptr<DeviceBuffer> k_pool, v_pool, table, lens;
  course::lab6::PagedCache cache;
};

PagedCopy make_paged(const void* k_cont, const void* v_cont, int B, int H_q, int H_kv, int nq, int nk, int page_size,
                     bool shuffled, cudaStream_t stream) {
  PagedCopy p;
  p.shape = {B, H_q, H_kv, nq, kD, page_size, 0, (nk + page_size - 1) / page_size};
  p.shape.num_pages = B * p.shape.max_pages;
  std::vector<int> table(size_t(p.shape.num_pages));
  std::iota(table.begin(), table.end(), 0);
  if (shuffled) std::shuffle(table.begin(), table.end(), std::mt19937_64(std::uint64_t(nk) * 1000 + page_size));
  const std::vector<int> lens(size_t(B), nk);
  const size_t row = size_t(kD) * 2, page = size_t(page_size) * row;  // bytes of one key row, of one page of one head
  p.k_pool = std::make_unique<DeviceBuffer>(size_t(p.shape.num_pages) * H_kv * page);
  p.v_pool = std::make_unique<DeviceBuffer>(size_t(p.shape.num_pages) * H_kv * page);
  p.table = std::make_unique<DeviceBuffer>(table.size() * 4);
  p.lens = std::make_unique<DeviceBuffer>(lens.size() * 4);
  check_cuda(cudaMemcpy(p.table->get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice), "table");
  check_cuda(cudaMemcpy(p.lens->get(), lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), "lengths");
  // One 2-D copy per (sequence, page): H_kv blocks of `rows` keys, nk rows apart in the
  // contiguous cache, one page apart in the pool.
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < p.shape.max_pages; ++j) {
      const size_t rows = size_t(std::min(page_size, nk - j * page_size));
      const size_t dst = size_t(table[size_t(b) * p.shape.max_pages + j]) * H_kv * page;
      const size_t src = (size_t(b) * H_kv * nk + size_t(j) * page_size) * row;
      for (auto [from, to] : {std::pair{k_cont, p.k_pool.get()}, std::pair{v_cont, p.v_pool.get()}})
        check_cuda(cudaMemcpy2DAsync(static_cast<char*>(to->get()) + dst, page, static_cast<const char*>(from) + src,
                                     size_t(nk) * row, rows * row, H_kv, cudaMemcpyDeviceToDevice, stream),
                   "page copy");
    }
  p.cache.k_pages = p.k_pool->get();
  p.cache.v_pages = p.v_pool->get();
  p.cache.block_table = static_cast<const int*>(p.table->get());
  p.cache.seqlens = static_cast<const int*>(p.lens->get());
  return p;
}

struct GqaShape {
  int B, H_q, H_kv;
  std::vector<int> nqs;
};

// The rows of one (shape, Nk): K and V drawn once, then for each Nq the in-order baseline and
// the shuffled pages of each size.
// Part 2's choices from the command line: the groups, group 8's Nq, the page sizes and the split
// counts (0: the library's own); part 1's lab6 rows take the split counts and the Nk list too.
struct Part2Options {
  std::vector<int> groups{1, 8};
  std::vector<int> nqs{1, 4, 8};  // group 8's new rows per sequence
  std::vector<int> nks;           // empty: the default list
  std::vector<int> pages{16, 64, 256};
  std::vector<int> splits{0};
  std::vector<long long> kv_gaps{-1};  // part 1's placements of V after K (-1: two allocations)
};

bool run_part2_point(FILE* csv, cudaStream_t stream, double copy, const GqaShape& g, int nk, const Timing& timing,
                     const std::function<double()>& elapsed_s, double budget_s, const Part2Options& options) {
  const course::DType dt = course::DType::bf16;
  const int group = g.H_q / g.H_kv;
  const size_t kv_elems = size_t(g.B) * g.H_kv * nk * kD, kv_bytes = 2 * kv_elems * 2;
  // The contiguous cache and one pool at a time: twice K and V.
  const std::string skip = skip_reason(kv_bytes, 2, elapsed_s(), budget_s);
  std::unique_ptr<DeviceBuffer> k, v;
  if (skip.empty()) {
    k = std::make_unique<DeviceBuffer>(kv_elems * 2), v = std::make_unique<DeviceBuffer>(kv_elems * 2);
    course::fill_normal(static_cast<__nv_bfloat16*>(k->get()), int64_t(kv_elems), kSeedK, stream);
    course::fill_normal(static_cast<__nv_bfloat16*>(v->get()), int64_t(kv_elems), kSeedV, stream);
  }
  for (int nq : g.nqs) {
    const size_t q_elems = size_t(g.B) * g.H_q * nq * kD;
    DeviceBuffer q(q_elems * 2), o(q_elems * 2), lse(q_elems / kD * 4);
    course::fill_normal(static_cast<__nv_bfloat16*>(q.get()), int64_t(q_elems), kSeedQ, stream);
    float* lse_p = static_cast<float*>(lse.get());
    auto check = [&] { return head0_error(q.get(), k->get(), v->get(), o.get(), true, nq, nk, nq > 1, stream); };
    // (layout, page size, forced split count or 0) of each row: the baseline first.
    struct Layout {
      std::string name;
      int page, splits;
    };
    // The baselines: at Nq = 1 part 1's kernel on the same data made contiguous; always
    // paged_decode on pages of 256 in pool order, so that the shuffled pages' cost is read
    // against the same kernel (part 1's does a group's rows its own way).
    std::vector<Layout> layouts;
    if (nq == 1) layouts.push_back({"contiguous", 0, 0});
    layouts.push_back({"in-order", 256, 0});
    for (int page : options.pages)
      for (int splits : options.splits) layouts.push_back({"shuffled", page, splits});
    for (const auto& [layout, page, forced_splits] : layouts) {
      Row r;
      r.part = 2, r.B = g.B, r.H_q = g.H_q, r.H_kv = g.H_kv, r.nq = nq, r.nk = nk, r.causal = nq > 1;
      r.layout = layout, r.page_size = page, r.kv_bytes = kv_bytes, r.l2 = timing.l2;
      r.impl = layout == "contiguous" ? "lab6" : "lab6:paged";
      r.status = skip.empty() ? skip_reason(0, 0, elapsed_s(), budget_s) : skip;
      if (r.status.empty() && !run_row(r, [&] {
            std::function<void()> call;
            std::unique_ptr<DeviceBuffer> workspace;
            PagedCopy paged;
            if (layout == "contiguous") {
              // The group's query heads are the rows of one KV head: Q [B, H_q, 1, d] read as
              // [B, H_kv, group, d]. Right at Nq = 1 only (no causal mask between the rows).
              const course::lab6::DecodeShape shape{g.B, g.H_kv, group, nk, kD};
              r.splits = course::lab6::choose_num_splits(shape, dt, sm_count());
              r.how = "part 1 kernel; the group as its Nq rows";
              workspace = std::make_unique<DeviceBuffer>(course::lab6::split_kv_workspace_bytes(shape, dt, r.splits));
              call = part1_call(q.get(), k->get(), v->get(), o.get(), lse_p, dt, shape, r.splits, *workspace, stream);
            } else {
              paged = make_paged(k->get(), v->get(), g.B, g.H_q, g.H_kv, nq, nk, page, layout == "shuffled", stream);
              r.splits = forced_splits > 0 ? forced_splits : course::lab6::choose_paged_splits(paged.shape, dt, sm_count());
              if (forced_splits > 0) r.how = "split count forced";
              workspace = std::make_unique<DeviceBuffer>(course::lab6::paged_workspace_bytes(paged.shape, dt, r.splits));
              call = [&] {
                course::lab6::PagedOptions opt;
                opt.causal = nq > 1;
                opt.num_splits = r.splits;
                opt.workspace = workspace->get();
                opt.workspace_bytes = workspace->bytes();
                opt.stream = stream;
                course::lab6::paged_decode(q.get(), paged.cache, o.get(), lse_p, dt, paged.shape, opt);
              };
            }
            check_cuda(cudaMemsetAsync(o.get(), 0xff, q_elems * 2, stream), "poison O");  // NaN until written
            time_checked(r, call, check, stream, timing);
          }))
        return false;
      if (r.status.empty()) r.status = "ok";
      write_row(csv, r, copy);
    }
  }
  return true;
}

// A part's Nk: --nks where given, else the quick pair, else every power of two from `first` to 128k.
std::vector<int> nk_list(const std::vector<int>& given, bool quick, int first) {
  if (!given.empty()) return given;
  if (quick) return {4096, 32768};
  std::vector<int> nks;
  for (int n = first; n <= 131072; n *= 2) nks.push_back(n);
  return nks;
}

bool run_part2(FILE* csv, cudaStream_t stream, double copy, bool quick, const Timing& timing,
               const std::function<double()>& elapsed_s, double budget_s, const Part2Options& options) {
  std::vector<GqaShape> shapes;
  if (std::find(options.groups.begin(), options.groups.end(), 1) != options.groups.end())
    shapes.push_back({1, kHeads, kHeads, {1}});
  if (std::find(options.groups.begin(), options.groups.end(), 8) != options.groups.end())
    shapes.push_back({4, kHeads, kHeads / 8, options.nqs});
  const std::vector<int> nks = nk_list(options.nks, quick, 4096);
  for (const GqaShape& g : shapes)
    for (int nk : nks)
      if (!run_part2_point(csv, stream, copy, g, nk, timing, elapsed_s, budget_s, options)) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path, bh_list = "1024,32", dtypes_arg = "bf16,fp32", impls_arg = "lab6,lab5", parts_arg = "1,2";
  bool quick = false;
  double budget_s = 1e9;
  Timing timing;
  Part2Options part2;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&] { return bench::option_value(argc, argv, i); };
      if (a == "--out") out_path = value();
      else if (a == "--quick") quick = true;
      else if (a == "--parts") parts_arg = value();
      else if (a == "--bh") bh_list = value();
      else if (a == "--dtypes") dtypes_arg = value();
      else if (a == "--impls") impls_arg = value();
      else if (a == "--budget-s") budget_s = std::stod(value());
      else if (a == "--max-reps") timing.max_reps = std::stoi(value());
      else if (a == "--l2") {
        timing.l2 = value();
        if (timing.l2 != "cold" && timing.l2 != "warm") throw std::invalid_argument("--l2 takes cold or warm");
      }
      else if (a == "--groups") part2.groups = bench::parse_choices(a, value(), {1, 8}, "part 2 has groups 1 and 8");
      else if (a == "--pages") part2.pages = bench::parse_counts(a, value());
      else if (a == "--splits") part2.splits = bench::parse_counts(a, value(), true);
      else if (a == "--nks") part2.nks = bench::parse_counts(a, value());
      else if (a == "--kv-gaps") part2.kv_gaps = bench::parse_gaps(a, value());
      else if (a == "--nqs") part2.nqs = bench::parse_choices(a, value(), {1, 4, 8}, "group 8 has Nq 1, 4 and 8");
      else if (a == "--list") {
        std::puts("lab6");
#if COURSE_HAVE_LAB5
        std::puts("lab5");
#endif
        std::puts("lab6:paged");
        return 0;
      } else {
        std::fprintf(stderr, "bench_decoding: unknown option %s\n", a.c_str());
        return 2;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_decoding: %s\n", e.what());
    return 2;
  }
  if (out_path.empty()) {
    std::fprintf(stderr, "usage: bench_decoding --out results.csv [--quick] [--parts 1,2] [--bh 1024,32] "
                         "[--dtypes bf16,fp32] [--impls lab6,lab5] [--budget-s S] [--max-reps N] [--groups 1,8] "
                         "[--pages 16,64,256] [--splits auto,16,33] [--nks 4096,65536] [--nqs 1,4,8] [--l2 cold|warm] "
                         "[--kv-gaps separate,0,65536]\n");
    return 2;
  }
  if (!bench::device_usable("bench_decoding")) return 2;
  const auto start = std::chrono::steady_clock::now();
  const std::function<double()> elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  FILE* csv = std::fopen(out_path.c_str(), "w");
  if (!csv) {
    std::perror(out_path.c_str());
    return 2;
  }
  std::fprintf(csv, "%s\n", kColumns);
  std::fflush(csv);

  const std::vector<int> nks = nk_list(part2.nks, quick, 1024);

  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const double copy = copy_gbps(stream);
  std::printf("device-to-device copy: %.0f GB/s (bytes read + written)\n", copy);
  const bench::L2Evictor evict_l2(stream);
  if (timing.l2 == "cold") timing.before_each = [&] { evict_l2(); };

  // Part 2 first: part 1's largest rows take most of the time, and the budget cuts the last rows.
  const std::vector<std::string> parts = bench::split_list(parts_arg);
  bool alive = true;
  if (has(parts, "2")) alive = run_part2(csv, stream, copy, quick, timing, elapsed_s, budget_s, part2);
  if (alive && has(parts, "1"))
    alive = run_part1(csv, stream, copy, nks, bh_list, bench::split_list(dtypes_arg), bench::split_list(impls_arg), part2.splits,
                      part2.kv_gaps, timing, elapsed_s, budget_s);
  std::fclose(csv);
  return alive ? 0 : 1;
}
