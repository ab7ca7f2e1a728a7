// Lab 6 part 2 grader: paged, grouped decoding (paged_decode) and the append of the new rows
// (append_kv).
//
// The grader draws Q, the cache's rows and the new rows with the GPU labs' data generator
// (gpu_grading::make_inputs), lays the cache's rows out in a pool of pages whose order is
// shuffled (every row that is not a cache row -- past a sequence's length, in a spare page, or
// where append_kv must write -- holds NaN), and compares O and LSE with the fp64 reference of
// each query head: reference::gather_pages makes its KV head's rows contiguous again from the
// pool and the block table, and reference::attention runs on them, causal bottom-right with the
// sequence's length. The bands are part 1's (grader/common/tolerances.cpp). Without a CUDA device
// every check is skipped.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "course/errors.hpp"
#include "compute_sanitizer.hpp"
#include "gpu_harness.hpp"
#include "lab_process.hpp"
#include "paged_wire.hpp"
#include "reference/reference.hpp"
#include "speed_rules.hpp"

using course::DType;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One paged call: the shape, the lengths (each sequence's, its new rows included), the options.
struct Paged {
  int B = 1, H_q = 1, H_kv = 1, Nq = 1, d = 64, page_size = 16;
  int spare_pages = 3;  // pages in the pool that no sequence owns
  int spare_slots = 1;  // block table columns past the longest sequence's pages
  DType dtype = DType::bf16;
  bool causal = false;
  float scale = 0.0f;
  int num_splits = 4;
  bool append = false;
  bool shuffle = true;
  std::vector<int> seqlens;         // the rows each sequence's pages hold
  std::vector<int> device_seqlens;  // the lengths the call gets, where they differ (clamped by it)

  const std::vector<int>& lengths_sent() const { return device_seqlens.empty() ? seqlens : device_seqlens; }

  int max_len() const { return *std::max_element(seqlens.begin(), seqlens.end()); }
  int max_pages() const { return (max_len() + page_size - 1) / page_size + spare_slots; }
  int capacity() const { return max_pages() * page_size; }  // keys a block-table row can hold
  int num_pages() const { return B * max_pages() + spare_pages; }
  course::lab6::PagedShape shape() const {
    return {B, H_q, H_kv, Nq, d, page_size, num_pages(), max_pages()};
  }
  gpu_grading::Config config() const {  // the outputs' shape, for the bands and the messages
    gpu_grading::Config c;
    c.B = B, c.H = H_q, c.Nq = Nq, c.Nk = max_len(), c.d = d, c.dtype = dtype, c.causal = causal, c.scale = scale;
    return c;
  }
  std::string describe() const {
    std::string s = std::string(append ? "append_kv + " : "") + "paged_decode (" + course::dtype_name(dtype) +
                    " B=" + std::to_string(B) + " H_q=" + std::to_string(H_q) + " H_kv=" + std::to_string(H_kv) +
                    " Nq=" + std::to_string(Nq) + " d=" + std::to_string(d) + " page_size=" +
                    std::to_string(page_size) + (causal ? " causal" : "") +
                    (shuffle ? " pages shuffled" : " pages in order") + " num_splits=" + std::to_string(num_splits) +
                    ", seqlens=[";
    for (std::size_t b = 0; b < seqlens.size(); ++b) s += (b ? ", " : "") + std::to_string(lengths_sent()[b]);
    return s + "]" + (device_seqlens.empty() ? "" : ", capacity " + std::to_string(capacity())) + ")";
  }
};

// The inputs of one call, as the kernel sees them and as doubles.
struct PagedInputs {
  std::vector<double> q;                  // [B, H_q, Nq, d]
  std::vector<std::uint8_t> q_bytes;
  std::vector<int> table;                 // [B, max_pages]
  std::vector<double> k_pool, v_pool;     // [num_pages, H_kv, page_size, d], NaN where no row is
  std::vector<std::uint8_t> k_pool_bytes, v_pool_bytes;
  std::vector<double> k_new, v_new;       // [B, H_kv, Nq, d] when appending
  std::vector<std::uint8_t> k_new_bytes, v_new_bytes;
  std::vector<double> k_after, v_after;   // the pools as append_kv must leave them
  std::vector<std::uint8_t> k_after_bytes, v_after_bytes;
};

PagedInputs make_paged_inputs(const Paged& t, std::uint64_t seed) {
  PagedInputs in;
  const std::size_t esize = course::dtype_bytes(t.dtype);
  gpu_grading::Config qc;
  qc.B = t.B, qc.H = t.H_q, qc.Nq = t.Nq, qc.Nk = 1, qc.d = t.d, qc.dtype = t.dtype;
  const gpu_grading::Inputs qi = gpu_grading::make_inputs(qc, seed);
  in.q = qi.q;
  in.q_bytes = qi.q_bytes;
  // The cache's rows, [B, H_kv, max_len, d], from the same generator.
  gpu_grading::Config kc;
  kc.B = t.B, kc.H = t.H_kv, kc.Nq = 1, kc.Nk = t.max_len(), kc.d = t.d, kc.dtype = t.dtype;
  const gpu_grading::Inputs ki = gpu_grading::make_inputs(kc, seed + 101);
  // The pool's pages: a permutation drawn from the seed (or the identity).
  const int pages = t.num_pages(), max_pages = t.max_pages();
  std::vector<int> perm(static_cast<std::size_t>(pages));
  std::iota(perm.begin(), perm.end(), 0);
  if (t.shuffle) {
    reference::Rng rng(seed, "pages/" + t.describe());
    for (int i = pages - 1; i > 0; --i) std::swap(perm[std::size_t(i)], perm[std::size_t(rng.uniform_int(0, i))]);
  }
  in.table.assign(std::size_t(t.B) * max_pages, 0);
  for (std::size_t i = 0; i < in.table.size(); ++i) in.table[i] = perm[i];
  const std::size_t pool = std::size_t(pages) * t.H_kv * t.page_size * t.d;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  in.k_pool.assign(pool, nan);
  in.v_pool.assign(pool, nan);
  in.k_pool_bytes.assign(pool * esize, 0xFF);  // all ones: NaN in bf16 and in fp16
  in.v_pool_bytes.assign(pool * esize, 0xFF);
  auto at = [&](int b, int h, int j) {  // element offset of sequence b's row j of KV head h
    const int page = in.table[std::size_t(b) * max_pages + j / t.page_size];
    return ((std::size_t(page) * t.H_kv + h) * t.page_size + j % t.page_size) * t.d;
  };
  if (t.append) {
    gpu_grading::Config nc = kc;
    nc.Nk = t.Nq;
    const gpu_grading::Inputs ni = gpu_grading::make_inputs(nc, seed + 202);
    in.k_new = ni.k, in.v_new = ni.v, in.k_new_bytes = ni.k_bytes, in.v_new_bytes = ni.v_bytes;
  }
  // The cache holds rows 0 .. len - 1 (before an append: rows 0 .. len - Nq - 1; the rest are
  // NaN until append_kv writes them).
  for (int b = 0; b < t.B; ++b)
    for (int h = 0; h < t.H_kv; ++h)
      for (int j = 0; j < t.seqlens[std::size_t(b)]; ++j) {
        const std::size_t dst = at(b, h, j);
        const std::size_t src = ((std::size_t(b) * t.H_kv + h) * t.max_len() + j) * t.d;
        if (t.append && j >= t.seqlens[std::size_t(b)] - t.Nq) continue;
        std::copy_n(ki.k.begin() + std::ptrdiff_t(src), t.d, in.k_pool.begin() + std::ptrdiff_t(dst));
        std::copy_n(ki.v.begin() + std::ptrdiff_t(src), t.d, in.v_pool.begin() + std::ptrdiff_t(dst));
        std::memcpy(&in.k_pool_bytes[dst * esize], &ki.k_bytes[src * esize], t.d * esize);
        std::memcpy(&in.v_pool_bytes[dst * esize], &ki.v_bytes[src * esize], t.d * esize);
      }
  in.k_after = in.k_pool, in.v_after = in.v_pool;
  in.k_after_bytes = in.k_pool_bytes, in.v_after_bytes = in.v_pool_bytes;
  if (t.append)
    for (int b = 0; b < t.B; ++b)
      for (int h = 0; h < t.H_kv; ++h)
        for (int i = 0; i < t.Nq; ++i) {
          const int pos = t.seqlens[std::size_t(b)] - t.Nq + i;
          if (pos < 0) continue;
          const std::size_t dst = at(b, h, pos);
          const std::size_t src = ((std::size_t(b) * t.H_kv + h) * t.Nq + i) * t.d;
          std::copy_n(in.k_new.begin() + std::ptrdiff_t(src), t.d, in.k_after.begin() + std::ptrdiff_t(dst));
          std::copy_n(in.v_new.begin() + std::ptrdiff_t(src), t.d, in.v_after.begin() + std::ptrdiff_t(dst));
          std::memcpy(&in.k_after_bytes[dst * esize], &in.k_new_bytes[src * esize], t.d * esize);
          std::memcpy(&in.v_after_bytes[dst * esize], &in.v_new_bytes[src * esize], t.d * esize);
        }
  return in;
}

struct PagedOutputs {
  gpu_grading::Outputs out;
  std::vector<std::uint8_t> k_pool, v_pool;  // after append_kv
};

PagedOutputs run_paged(const Paged& t, const PagedInputs& in) {
  paged_wire::PagedCall call;
  call.shape = t.shape();
  call.dtype = t.dtype;
  call.causal = t.causal;
  call.scale = t.scale;
  call.num_splits = t.num_splits;
  call.append = t.append;
  isolation::Packet args;
  paged_wire::put_call(args, call);
  gpu_wire::put_bytes(args, in.q_bytes);
  gpu_wire::put_bytes(args, in.k_pool_bytes);
  gpu_wire::put_bytes(args, in.v_pool_bytes);
  gpu_wire::put_bytes(args, paged_wire::bytes_of_ints(in.table));
  gpu_wire::put_bytes(args, paged_wire::bytes_of_ints(t.lengths_sent()));
  if (t.append) {
    gpu_wire::put_bytes(args, in.k_new_bytes);
    gpu_wire::put_bytes(args, in.v_new_bytes);
  }
  auto reply = isolation::lab().call(std::string("paged/") + course::dtype_name(t.dtype), args);
  PagedOutputs r;
  r.out = gpu_grading::read_outputs(reply.results, t.config(), t.describe());
  if (t.append) {
    r.k_pool = gpu_wire::get_bytes(reply.results);
    r.v_pool = gpu_wire::get_bytes(reply.results);
  }
  return r;
}

void put_head(const reference::Attention<double>& a, int nq, int d, int row0, gpu_grading::Outputs& out) {
  for (int r = 0; r < nq; ++r) {
    out.lse[std::size_t(row0 + r)] = a.lse(r);
    for (int j = 0; j < d; ++j) out.O[std::size_t(row0 + r) * d + j] = a.O(r, j);
  }
}

// The fp64 reference and plain same-dtype attention of every query head, on its KV head's rows
// gathered from the pool (as append_kv must leave it).
gpu_grading::Reference paged_reference(const Paged& t, const PagedInputs& in) {
  gpu_grading::Reference ref;
  const std::size_t rows = std::size_t(t.B) * t.H_q * t.Nq;
  for (gpu_grading::Outputs* o : {&ref.exact, &ref.plain}) {
    o->O.assign(rows * t.d, 0.0);
    o->lse.assign(rows, kNegInf);
  }
  const gpu_grading::Config c = t.config();
  const double scale = c.scale_value();
  const int group = t.H_q / t.H_kv;
  double q_norm = 0, k_norm = 0;
  for (int b = 0; b < t.B; ++b) {
    // The API's rule for lengths on the device: clamped into [0, capacity].
    const int len = std::clamp(t.lengths_sent()[std::size_t(b)], 0, t.capacity());
    for (int h = 0; h < t.H_q; ++h) {
      const int row0 = (b * t.H_q + h) * t.Nq;
      Eigen::MatrixXd q(t.Nq, t.d);
      for (int r = 0; r < t.Nq; ++r)
        for (int j = 0; j < t.d; ++j) q(r, j) = in.q[std::size_t(row0 + r) * t.d + j];
      q_norm = std::max(q_norm, q.rowwise().norm().maxCoeff());
      if (len == 0) continue;
      const int* block_row = &in.table[std::size_t(b) * t.max_pages()];
      const Eigen::MatrixXd k = reference::gather_pages(in.k_after.data(), t.num_pages(), t.H_kv, t.page_size, t.d,
                                                        block_row, len, h / group);
      const Eigen::MatrixXd v = reference::gather_pages(in.v_after.data(), t.num_pages(), t.H_kv, t.page_size, t.d,
                                                        block_row, len, h / group);
      k_norm = std::max(k_norm, k.rowwise().norm().maxCoeff());
      ref.value_max = std::max(ref.value_max, v.cwiseAbs().maxCoeff());
      put_head(reference::attention<double>(q, k, v, scale, t.causal), t.Nq, t.d, row0, ref.exact);
      if (t.dtype == DType::bf16)
        put_head(reference::plain_attention<Eigen::bfloat16>(q, k, v, scale, t.causal), t.Nq, t.d, row0, ref.plain);
      else
        put_head(reference::plain_attention<Eigen::half>(q, k, v, scale, t.causal), t.Nq, t.d, row0, ref.plain);
    }
  }
  ref.score_max = scale * q_norm * k_norm;
  return ref;
}

// The pools after append_kv, row by row against what they must hold.
void expect_pools(const Paged& t, const PagedInputs& in, const PagedOutputs& got, std::uint64_t seed) {
  const std::size_t row_bytes = std::size_t(t.d) * course::dtype_bytes(t.dtype);
  const std::size_t pool_rows = std::size_t(t.num_pages()) * t.H_kv * t.page_size;
  for (auto [name, want, have] : {std::tuple{"K", &in.k_after_bytes, &got.k_pool},
                                  std::tuple{"V", &in.v_after_bytes, &got.v_pool}}) {
    if (have->size() != want->size()) throw isolation::LabFailure("the lab process returned pools of the wrong size");
    for (std::size_t r = 0; r < pool_rows; ++r) {
      if (std::memcmp(want->data() + r * row_bytes, have->data() + r * row_bytes, row_bytes) == 0) continue;
      const std::size_t page = r / (std::size_t(t.H_kv) * t.page_size);
      const std::size_t head = r / t.page_size % t.H_kv, row = r % t.page_size;
      const grading::Case about{"append_kv " + std::string(name) + " pool", course::dtype_name(t.dtype),
                                {t.num_pages(), t.H_kv, t.page_size, t.d}, t.describe(), seed};
      grading::expect(false, about,
                      std::string(name) + " pool page " + std::to_string(page) + ", KV head " + std::to_string(head) +
                          ", row " + std::to_string(row) + " is not what append_kv must leave there (" +
                          (std::memcmp(in.k_pool_bytes.data() + r * row_bytes, want->data() + r * row_bytes,
                                       row_bytes) == 0
                               ? "a row that append_kv must not touch: it wrote to the wrong page or row"
                               : "a new row's place: the new row is missing or wrong") +
                          ")");
      return;
    }
  }
}

bool check(const Paged& t, std::uint64_t seed = grading::seed()) {
  const PagedInputs in = make_paged_inputs(t, seed);
  const PagedOutputs got = run_paged(t, in);
  if (t.append) expect_pools(t, in, got, seed);
  grading::expect(got.out.inputs_unchanged, {t.describe(), course::dtype_name(t.dtype), {t.B, t.H_q, t.Nq, t.d},
                                             "", seed},
                  "the call modified Q, the pools (as given), the block table or the lengths");
  return gpu_grading::expect_matches(t.config(), got.out, paged_reference(t, in), t.describe(), seed);
}

Paged paged(DType dtype, int B, int H_q, int H_kv, int nq, int d, int page_size, std::vector<int> seqlens,
            bool causal = false, int splits = 4) {
  Paged t;
  t.dtype = dtype, t.B = B, t.H_q = H_q, t.H_kv = H_kv, t.Nq = nq, t.d = d, t.page_size = page_size;
  t.seqlens = std::move(seqlens);
  t.causal = causal;
  t.num_splits = splits;
  return t;
}

const char* kPages = "paged: page sizes 16, 64 and 256, pages in any order (bf16 and fp16, d = 64 and 128)";

}  // namespace

TEST_CASE("paged: page sizes 16, 64 and 256, pages in any order (bf16 and fp16, d = 64 and 128)" *
          grading::points(3)) {
  gpu_grading::require_device();
  // 700 keys: 44 pages of 16, 11 of 64 (the last one partial), 3 of 256; a page of 16 is smaller
  // than a tile of the key loop (64 keys), so every tile straddles pages.
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int d : {64, 128})
      for (int ps : {16, 64, 256}) check(paged(dtype, 2, 4, 2, 1, d, ps, {700, 389}));
  Paged in_order = paged(DType::bf16, 2, 2, 2, 1, 128, 64, {700, 389});
  in_order.shuffle = false;
  check(in_order);
}

TEST_CASE("paged: lengths per sequence, 0, 1 and not multiples of the page or of a step" *
          grading::points(3, kPages)) {
  gpu_grading::require_device();
  // The rows past a length in its last page, and every spare page, hold NaN: a read past a
  // sequence's length shows up as NaN in O.
  const std::vector<int> lens = {0, 1, 15, 16, 17, 63, 64, 65, 113, 1000};
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int ps : {16, 64})
      for (int splits : {1, 3, 16}) check(paged(dtype, 10, 2, 1, 1, 64, ps, lens, false, splits));
  check(paged(DType::bf16, 3, 8, 2, 4, 128, 256, {300, 37, 257}, true, 5));
  // Lengths on the device are clamped into [0, capacity] (course/lab6_paged.hpp): a length past
  // the capacity reads the sequence's whole cache and no further (here the next slot would be
  // the next sequence's first page), a negative one reads nothing.
  Paged clamped = paged(DType::bf16, 3, 4, 2, 1, 64, 16, {320, 37, 100});
  clamped.spare_slots = 0;  // capacity 320: the first sequence's pages are full
  clamped.device_seqlens = {320 + 16, -5, 100};
  check(clamped);
}

TEST_CASE("paged: GQA groups 1 (MHA), 4, 8 and MQA, one read of K/V per group" * grading::points(3, kPages)) {
  gpu_grading::require_device();
  // group * Nq rows per KV head: 1, 4, 8, 16 (one row block of an mma tile), 32 (MQA with 32
  // heads: two row blocks), 64 (8 heads of 8 rows: four row blocks, one tile of 64 rows).
  for (DType dtype : {DType::bf16, DType::fp16}) {
    check(paged(dtype, 2, 4, 4, 1, 128, 16, {300, 200}));         // MHA
    check(paged(dtype, 2, 8, 2, 1, 128, 64, {300, 200}));         // group 4
    check(paged(dtype, 2, 16, 2, 2, 64, 64, {513, 77}, true));    // group 8, Nq = 2
    check(paged(dtype, 2, 32, 1, 1, 128, 16, {450, 129}));        // MQA, 32 heads
    check(paged(dtype, 1, 8, 1, 8, 64, 32, {333}, true, 3));      // MQA, 8 heads, Nq = 8: 64 rows
  }
  // 4096 output rows (8 sequences, 32 query heads, Nq = 16; 128 packed rows per KV head: two
  // tiles of 64): more rows than a GPU holds merge CTAs of one row at once, so the merge packs
  // several rows into a CTA.
  check(paged(DType::bf16, 8, 32, 4, 16, 64, 16, {100, 37, 64, 16, 200, 17, 90, 129}, true, 2));
}

TEST_CASE("paged: Nq = 1, 4 and 16 new rows, causal bottom-right with each sequence's length" *
          grading::points(3, kPages)) {
  gpu_grading::require_device();
  // Lengths below Nq leave the first Nq - len rows with no key: O = 0, LSE = -inf.
  const std::vector<int> lens = {0, 3, 16, 17, 100, 250};
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int nq : {1, 4, 16})
      for (int splits : {1, 4}) check(paged(dtype, 6, 4, 2, nq, 64, 16, lens, true, splits));
  check(paged(DType::bf16, 2, 4, 1, 16, 128, 64, {700, 31}, false, 4));  // not causal
}

TEST_CASE("paged: append the new K/V rows into their pages, then decode" * grading::points(3, kPages)) {
  gpu_grading::require_device();
  // The new rows' places hold NaN until append_kv writes them; the pools come back and are
  // compared row by row, then O and LSE with the reference on the cache after the append.
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int nq : {1, 4, 16}) {
      Paged t = paged(dtype, 3, 8, 2, nq, 128, 16, {48, 31, 300}, true, 3);
      t.append = true;
      check(t);
    }
  Paged t = paged(DType::bf16, 2, 4, 4, 5, 64, 256, {260, 3}, true, 2);  // 3 < Nq: two rows have no place
  t.append = true;
  check(t);
}

TEST_CASE("paged: split counts 1 to 64 and the library's own choice, long caches" * grading::points(2, kPages)) {
  gpu_grading::require_device();
  for (int splits : {1, 2, 7, 64}) check(paged(DType::bf16, 2, 8, 2, 1, 128, 64, {1000, 5}, false, splits));
  check(paged(DType::fp16, 2, 16, 2, 1, 128, 256, {9000, 4321}, false, 0));
  check(paged(DType::bf16, 1, 4, 1, 4, 64, 16, {5000}, true, 0));
}

TEST_CASE("paged: compute-sanitizer finds no race, barrier misuse or bad access" * grading::points(2, kPages)) {
  gpu_grading::require_device();
  // append_kv, the splits and the merge on small problems under compute-sanitizer
  // (grader/gpu/compute_sanitizer.hpp). One split per sequence, so that the key loop ends in the
  // ring's first buffer (1 and 7 tiles of 64 keys at d = 128, three buffers; 5 at d = 64, four)
  // and in another (3 tiles at d = 64): the ring is reused for the warps' combine, and a combine
  // that starts before every warp has read the last tile is a race racecheck sees. Pages of 16
  // rows (every tile straddles pages), lengths below Nq, causal and not.
  Paged appended = paged(DType::bf16, 3, 8, 2, 4, 128, 16, {48, 31, 440}, true, 1);
  appended.append = true;
  const std::vector<Paged> shapes = {appended, paged(DType::fp16, 2, 8, 1, 2, 64, 64, {300, 129}, false, 1),
                                     paged(DType::bf16, 2, 4, 2, 4, 128, 16, {2, 100}, true, 2)};
  std::string described;
  for (const Paged& t : shapes) described += (described.empty() ? "" : "; ") + t.describe();
  gpu_grading::check_under_compute_sanitizer({"paged_decode, append_kv", "bf16, fp16", {}, described}, [&] {
    for (const Paged& t : shapes) check(t);
  });
}

namespace {
// A call that must be rejected; returns only if nothing was thrown. `which`: 0 paged_decode,
// 1 append_kv, 2 paged_decode with a workspace 16 bytes too small.
void bad_paged(const course::lab6::PagedShape& s, std::vector<int> table, std::vector<int> lens, int which = 0,
               bool null_q = false, int splits = 2) {
  paged_wire::PagedCall call;
  call.shape = s;
  call.num_splits = splits;
  isolation::Packet args;
  paged_wire::put_call(args, call);
  table.resize(std::size_t(s.B) * std::max(s.max_pages, 0), 0);
  lens.resize(std::size_t(std::max(s.B, 0)), 0);
  gpu_wire::put_bytes(args, paged_wire::bytes_of_ints(table));
  gpu_wire::put_bytes(args, paged_wire::bytes_of_ints(lens));
  args.put<std::uint8_t>(std::uint8_t(which));
  args.put<std::uint8_t>(null_q);
  isolation::lab().call("paged_bad", args);
}

// Passes when the call is rejected with course::BadInput whose message holds `says`.
void expect_rejected(const char* what, const std::string& says, const std::function<void()>& call) {
  try {
    call();
    grading::expect(false, {"paged_decode", "bf16", {}, what}, std::string("accepted: ") + what);
  } catch (const course::BadInput& e) {
    grading::expect(std::string(e.what()).find(says) != std::string::npos, {"paged_decode", "bf16", {}, what},
                    std::string("rejected, but the message does not say '") + says + "': " + e.what());
  }
}
}  // namespace

TEST_CASE("paged: bad input gets a clear error" * grading::points(2, kPages)) {
  gpu_grading::require_device();
  using S = course::lab6::PagedShape;
  const S ok{2, 8, 2, 1, 64, 16, 8, 4};  // B, H_q, H_kv, Nq, d, page_size, num_pages, max_pages
  const std::vector<int> table = {0, 1, 2, 3, 4, 5, 6, 7}, lens = {64, 50};
  auto with = [&](auto change) {
    S s = ok;
    change(s);
    return s;
  };
  expect_rejected("page size 48", "page_size", [&] { bad_paged(with([](S& s) { s.page_size = 48; }), table, lens); });
  expect_rejected("page size 512", "page_size", [&] { bad_paged(with([](S& s) { s.page_size = 512; }), table, lens); });
  expect_rejected("H_q = 6 with H_kv = 4", "multiple of H_kv",
                  [&] { bad_paged(with([](S& s) { s.H_q = 6, s.H_kv = 4; }), table, lens); });
  expect_rejected("Nq = 17", "Nq", [&] { bad_paged(with([](S& s) { s.Nq = 17; }), table, lens); });
  expect_rejected("d = 96", "head dimension", [&] { bad_paged(with([](S& s) { s.d = 96; }), table, lens); });
  expect_rejected("a length past the block table's capacity (65 > 4 pages of 16)", "seqlens[1] = 65",
                  [&] { bad_paged(ok, table, {64, 65}); });
  expect_rejected("a negative length", "seqlens[0] = -1", [&] { bad_paged(ok, table, {-1, 5}); });
  expect_rejected("a page index past the pool", "block_table[1][2] = 8",
                  [&] { bad_paged(ok, {0, 1, 2, 3, 4, 5, 8, 7}, lens); });
  expect_rejected("a negative page index", "block_table[0][0] = -1",
                  [&] { bad_paged(ok, {-1, 1, 2, 3, 4, 5, 6, 7}, lens); });
  expect_rejected("Q null", "non-null", [&] { bad_paged(ok, table, lens, 0, true); });
  expect_rejected("workspace too small", "workspace", [&] { bad_paged(ok, table, lens, 2); });
  expect_rejected("num_splits = -1", "num_splits", [&] { bad_paged(ok, table, lens, 0, false, -1); });
  expect_rejected("append_kv: a page index past the pool", "block_table[0][3] = 9",
                  [&] { bad_paged(ok, {0, 1, 2, 9, 4, 5, 6, 7}, lens, 1); });
  expect_rejected("append_kv: K_new null", "non-null", [&] { bad_paged(ok, table, lens, 1, true); });
  // Entries past a sequence's pages are not looked at: a block table row may end in anything.
  expect_rejected("a workspace too small, with a block table row ending in an unused entry", "workspace",
                  [&] { bad_paged(ok, {0, 1, 2, 3, 4, 5, 6, 99}, {64, 40}, 2); });
}

// The speed rule of part 2: paged_decode's time over the time a device-to-device copy takes to
// read the same bytes of K and V (half of the copy's time: it reads and writes them), both timed
// in this run on this GPU. Decoding only reads K and V, once per KV head, so the copy's rate is
// what a kernel that keeps the memory busy approaches. Full points at 2x or less (half the copy's
// rate or more), none at 4x or more, linear between. Part 1's split_kv_forward on the same data
// made contiguous is timed too, and shown: a tensor-core kernel that reads K and V once per query
// head (the planted bug) can still beat part 1's CUDA-core kernel, so part 1 cannot be the
// yardstick. At 16384 keys the launch of two kernels and the pipeline's first tiles are a sizeable
// share of the time, hence a yardstick of 2x; lecture 6 gives the measured figures.
constexpr double kPagedFullAt = 2.0, kPagedNoneAt = 4.0;

TEST_CASE("speed: paged GQA decoding reads K and V at half the copy rate or more" *
          grading::points(3, kPages)) {
  gpu_grading::require_device();
  // bf16, d = 128, 4 sequences of 16384 keys in pages of 64, 32 query heads in groups of 8
  // (4 KV heads), Nq = 1: 134 MB of K and V, more than the L2 cache.
  paged_wire::PagedCall call;
  const int len = 16384, ps = 64;
  call.shape = {4, 32, 4, 1, 128, ps, 4 * (len / ps) + 7, len / ps};
  isolation::Packet args;
  paged_wire::put_call(args, call);
  args.put<std::int32_t>(len);
  args.put<std::uint64_t>(grading::seed());
  auto reply = isolation::lab().call("paged_time", args);
  paged_wire::TimeAnswer a;
  for (double* v : {&a.paged_ms, &a.contiguous_ms, &a.copy_ms, &a.kv_bytes, &a.max_diff, &a.o_max})
    *v = reply.results.get<double>();
  a.finite = reply.results.get<std::uint8_t>() != 0;
  const grading::Case about{"paged_decode vs split_kv_forward (timed shape)", "bf16", {4, 32, 1, 128},
                            "B=4 H_q=32 H_kv=4 Nq=1 d=128 page_size=64 seqlens=16384"};
  // What was timed must be attention on both sides: the two results agree to bf16 rounding (two
  // fp32 computations of the same attention, each rounded once to bf16, differ by an ulp of bf16,
  // 0.4-0.8% of the value), here held to 5% of the largest |O|. A kernel that skips the work
  // (zeros, or a few keys) is off by the size of O itself.
  if (!grading::expect(a.finite && a.o_max > 0 && a.max_diff <= 0.05 * a.o_max, about,
                       "the timed outputs of paged_decode and split_kv_forward differ (max |diff| = " +
                           std::to_string(a.max_diff) + " against max |O| = " + std::to_string(a.o_max) +
                           (a.finite ? "" : ", NaN/Inf") + "), so the times do not count"))
    return;
  const double copy_read_ms = a.copy_ms / 2;  // the copy reads kv_bytes and writes as many
  const double ratio = a.paged_ms / copy_read_ms;
  char note[500];
  std::snprintf(note, sizeof note,
                "timed on the %s: paged %.3f ms (%.0f GB/s of K and V, %.0f%% of the copy's rate); a device-to-device "
                "copy of the same bytes %.0f GB/s (read + written), so reading them at that rate takes %.3f ms: "
                "ratio %.2fx; part 1 on the same data contiguous %.3f ms (%.0f GB/s); full points within %.2fx, none "
                "at %.1fx",
                gpu_grading::device_name().c_str(), a.paged_ms, a.kv_bytes / a.paged_ms / 1e6, 100.0 / ratio,
                2 * a.kv_bytes / a.copy_ms / 1e6, copy_read_ms, ratio, a.contiguous_ms,
                a.kv_bytes / a.contiguous_ms / 1e6, kPagedFullAt, kPagedNoneAt);
  grading::award_fraction(gpu_grading::speed_fraction(-ratio, -kPagedNoneAt, -kPagedFullAt), note);
}
