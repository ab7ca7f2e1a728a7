// Lab 6 grader: split-KV decoding on the GPU, and the merge alone.
//
// Every decoding call runs in the lab process inside grader/gpu/device_run: inputs between NaN
// guard zones, NaN-poisoned O and LSE, a NaN-poisoned workspace, a busy default stream and a
// non-blocking stream in options.stream. Its O and LSE are compared with the fp64 CPU reference
// (reference/) computed, for each (batch, head), on the first len keys of that batch element,
// in the bands of lab 4 (grader/common/tolerances.cpp): a multiple of what plain attention in
// the same dtype errs on the same inputs, plus a floor. The merge alone is compared with lab 2's
// combine of the same partial results in fp64. Without a CUDA device every check is skipped,
// and the scoreboard says so.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "course/errors.hpp"
#include "compute_sanitizer.hpp"
#include "decode_wire.hpp"
#include "gpu_harness.hpp"
#include "lab_process.hpp"
#include "reference/reference.hpp"

using course::DType;
using gpu_grading::Config;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One decoding call: the attention configuration (c.Nk is Nk_max), the split count and the
// batch elements' KV lengths (empty: seqlens_k = nullptr, every length Nk_max).
struct Decode {
  Config c;
  int num_splits = 1;
  std::vector<int> seqlens;

  int len(int b) const { return seqlens.empty() ? c.Nk : std::clamp(seqlens[std::size_t(b)], 0, c.Nk); }
  std::string describe() const {
    std::string s = "split_kv_forward (num_splits=" + std::to_string(num_splits);
    if (!seqlens.empty()) {
      s += ", seqlens_k=[";
      for (std::size_t b = 0; b < seqlens.size(); ++b) s += (b ? ", " : "") + std::to_string(seqlens[b]);
      s += "]";
    }
    return s + ")";
  }
};

// Runs split_kv_forward in the lab process and reads back what it wrote.
gpu_grading::Outputs run_decode(const Decode& t, const gpu_grading::Inputs& in) {
  decode_wire::DecodeCall call;
  call.base = t.c.call();
  call.num_splits = t.num_splits;
  call.has_seqlens = !t.seqlens.empty();
  call.seqlens.assign(t.seqlens.begin(), t.seqlens.end());
  isolation::Packet args;
  decode_wire::put_decode(args, call);
  gpu_wire::put_bytes(args, in.q_bytes);
  gpu_wire::put_bytes(args, in.k_bytes);
  gpu_wire::put_bytes(args, in.v_bytes);
  auto reply = isolation::lab().call(std::string("decode/") + course::dtype_name(t.c.dtype), args);
  return gpu_grading::read_outputs(reply.results, t.c, t.c.describe() + ", " + t.describe());
}

// Rows [first, first + n) of head bh of a flattened [B, H, rows, d] tensor.
Eigen::MatrixXd slice(const std::vector<double>& t, int rows, int d, int bh, int n) {
  Eigen::MatrixXd m(n, d);
  const std::size_t base = std::size_t(bh) * rows * d;
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < d; ++j) m(r, j) = t[base + std::size_t(r) * d + j];
  return m;
}

void put_head(const reference::Attention<double>& a, int nq, int d, int bh, gpu_grading::Outputs& out) {
  for (int r = 0; r < nq; ++r) {
    out.lse[std::size_t(bh) * nq + r] = a.lse(r);
    for (int j = 0; j < d; ++j) out.O[(std::size_t(bh) * nq + r) * d + j] = a.O(r, j);
  }
}

// The fp64 reference and the plain same-dtype attention, for each (batch, head) on the first len
// keys of its batch element; a head with len = 0 has O = 0 and LSE = -inf in every row.
gpu_grading::Reference reference_for(const Decode& t, const gpu_grading::Inputs& in) {
  const Config& c = t.c;
  gpu_grading::Reference ref;
  const std::size_t rows = std::size_t(c.B) * c.H * c.Nq;
  for (gpu_grading::Outputs* o : {&ref.exact, &ref.plain}) {
    o->O.assign(rows * c.d, 0.0);
    o->lse.assign(rows, kNegInf);
  }
  const double scale = c.scale_value();
  double q_norm = 0, k_norm = 0;
  for (int bh = 0; bh < c.B * c.H; ++bh) {
    const int len = t.len(bh / c.H);
    const Eigen::MatrixXd q = slice(in.q, c.Nq, c.d, bh, c.Nq);
    q_norm = std::max(q_norm, q.rowwise().norm().maxCoeff());
    if (len == 0) continue;
    const Eigen::MatrixXd k = slice(in.k, c.Nk, c.d, bh, len), v = slice(in.v, c.Nk, c.d, bh, len);
    k_norm = std::max(k_norm, k.rowwise().norm().maxCoeff());
    for (int r = 0; r < len; ++r)
      for (int j = 0; j < c.d; ++j) ref.value_max = std::max(ref.value_max, std::abs(v(r, j)));
    put_head(reference::attention<double>(q, k, v, scale, c.causal), c.Nq, c.d, bh, ref.exact);
    if (c.dtype == DType::fp32)
      put_head(reference::plain_attention<float>(q, k, v, scale, c.causal), c.Nq, c.d, bh, ref.plain);
    else
      put_head(reference::plain_attention<Eigen::bfloat16>(q, k, v, scale, c.causal), c.Nq, c.d, bh, ref.plain);
  }
  ref.score_max = scale * q_norm * k_norm;  // Cauchy-Schwarz: a bound on every |S_ij|
  return ref;
}

bool check(const Decode& t, std::uint64_t seed = grading::seed()) {
  const gpu_grading::Inputs in = gpu_grading::make_inputs(t.c, seed);
  const gpu_grading::Outputs got = run_decode(t, in);
  return gpu_grading::expect_matches(t.c, got, reference_for(t, in), t.describe(), seed);
}

Decode decode(DType dtype, int B, int H, int nq, int nk_max, int d, bool causal, int splits,
              std::vector<int> seqlens = {}) {
  Decode t;
  t.c.B = B;
  t.c.H = H;
  t.c.Nq = nq;
  t.c.Nk = nk_max;
  t.c.d = d;
  t.c.dtype = dtype;
  t.c.causal = causal;
  t.num_splits = splits;
  t.seqlens = std::move(seqlens);
  return t;
}

// Small shapes: Nq of 1 (plain decoding), 4 and 16 (the most the API takes); a cache of 1 key,
// of 113 (not a multiple of anything) and of 1000; d = 64 and 128; causal and not.
void small_shapes(DType dtype) {
  for (int d : {64, 128})
    for (int nq : {1, 4, 16})
      for (int nk : {1, 113, 1000})
        for (bool causal : {false, true}) check(decode(dtype, 2, 3, nq, nk, d, causal, nk == 1 ? 1 : 4));
}

// ---------------------------------------------------------------------------------------------
// The merge alone against lab 2's combine in fp64.

// Lab 2's statistics of a block, (m, l), and its exact combine (FA1 Algorithm 1, line 11), in
// fp64 with the identity (-inf, 0). A split's normalised partial (O_s, LSE_s) is the block
// (m = LSE_s, l = 1) -- or the identity when LSE_s = -inf -- whose weight in the result is
// exp(LSE_s - LSE).
struct Stats {
  double m = kNegInf, l = 0;
};
Stats combine(Stats a, Stats b) {
  const double m = std::max(a.m, b.m);
  if (m == kNegInf) return {};
  return {m, a.l * std::exp(a.m - m) + b.l * std::exp(b.m - m)};
}

struct MergeCase {
  std::string name;
  int rows = 1, splits = 1, d = 64;
  std::vector<float> o_partial;  // [splits, rows, d]
  std::vector<float> lse_partial;  // [splits, rows]
};

// The merged O and LSE of a case, in fp64 (exact) or, for the band's yardstick, in fp32 with the
// same formula (the plain same-precision merge), O rounded to the dtype.
void merge_on_cpu(const MergeCase& m, bool fp64, DType dtype, std::vector<double>& O, std::vector<double>& lse) {
  O.assign(std::size_t(m.rows) * m.d, 0.0);
  lse.assign(std::size_t(m.rows), kNegInf);
  for (int r = 0; r < m.rows; ++r) {
    Stats total;
    for (int s = 0; s < m.splits; ++s) {
      const double x = m.lse_partial[std::size_t(s) * m.rows + r];
      total = combine(total, x == kNegInf ? Stats{} : Stats{x, 1.0});
    }
    if (total.m == kNegInf) continue;  // every split empty: O = 0, LSE = -inf
    if (fp64) {
      const double L = total.m + std::log(total.l);
      lse[std::size_t(r)] = L;
      for (int s = 0; s < m.splits; ++s) {
        const double w = std::exp(double(m.lse_partial[std::size_t(s) * m.rows + r]) - L);
        for (int j = 0; j < m.d; ++j)
          O[std::size_t(r) * m.d + j] += w * m.o_partial[(std::size_t(s) * m.rows + r) * m.d + j];
      }
    } else {
      const float M = float(total.m);
      float sum = 0;
      for (int s = 0; s < m.splits; ++s) sum += std::exp(m.lse_partial[std::size_t(s) * m.rows + r] - M);
      lse[std::size_t(r)] = M + std::log(sum);
      for (int j = 0; j < m.d; ++j) {
        float acc = 0;
        for (int s = 0; s < m.splits; ++s)
          acc += std::exp(m.lse_partial[std::size_t(s) * m.rows + r] - M) / sum *
                 m.o_partial[(std::size_t(s) * m.rows + r) * m.d + j];
        O[std::size_t(r) * m.d + j] = dtype == DType::fp32 ? double(acc) : double(float(Eigen::bfloat16(acc)));
      }
    }
  }
}

// Partial results of `splits` splits for `rows` rows; lse_of(s, r) gives LSE_s of row r.
template <class F>
MergeCase make_merge(const std::string& name, int rows, int splits, int d, F lse_of, std::uint64_t seed) {
  MergeCase m{name, rows, splits, d, {}, {}};
  reference::Rng rng(seed, "merge/" + name);
  m.o_partial.resize(std::size_t(splits) * rows * d);
  for (float& x : m.o_partial) x = float(rng.normal());
  m.lse_partial.resize(std::size_t(splits) * rows);
  for (int s = 0; s < splits; ++s)
    for (int r = 0; r < rows; ++r) m.lse_partial[std::size_t(s) * rows + r] = float(lse_of(s, r, rng));
  return m;
}

void check_merge(const MergeCase& m, DType dtype, std::uint64_t seed) {
  decode_wire::MergeCall call{dtype, m.rows, m.splits, m.d};
  isolation::Packet args;
  decode_wire::put_merge(args, call);
  decode_wire::put_floats(args, m.o_partial);
  decode_wire::put_floats(args, m.lse_partial);
  auto reply = isolation::lab().call("merge", args);
  const auto o_bytes = gpu_wire::get_bytes(reply.results);
  const auto lse_f = decode_wire::get_floats(reply.results);
  const bool inputs_unchanged = reply.results.get<std::uint8_t>() != 0;
  if (reply.results.get<std::uint8_t>() == 0)
    throw std::runtime_error("merge_partials wrote outside O and LSE (into the guard zone around a buffer)");
  if (!inputs_unchanged) throw std::runtime_error("merge_partials modified its inputs O_partial or lse_partial");
  if (o_bytes.size() != std::size_t(m.rows) * m.d * course::dtype_bytes(dtype) ||
      lse_f.size() != std::size_t(m.rows))
    throw isolation::LabFailure("the lab process returned outputs of the wrong size");
  const std::vector<double> got_o = gpu_grading::to_doubles(dtype, o_bytes), got_lse(lse_f.begin(), lse_f.end());
  std::vector<double> ref_o, ref_lse, plain_o, plain_lse;
  merge_on_cpu(m, true, dtype, ref_o, ref_lse);
  merge_on_cpu(m, false, dtype, plain_o, plain_lse);
  const std::string dt = course::dtype_name(dtype);
  const grading::Shape o_shape = {m.rows, m.d}, lse_shape = {m.rows};
  const std::string inputs = m.name + ", " + std::to_string(m.splits) + " splits";
  grading::expect_within({"merge_partials O", dt, o_shape, inputs, seed}, grading::compare(got_o, ref_o, o_shape),
                         grading::tolerance(grading::Quantity::output, dt,
                                            grading::compare(plain_o, ref_o, o_shape).max_abs, gpu_grading::max_abs_finite(ref_o)));
  grading::expect_within({"merge_partials lse", dt, lse_shape, inputs, seed},
                         grading::compare(got_lse, ref_lse, lse_shape),
                         grading::tolerance(grading::Quantity::lse, "fp32",
                                            grading::compare(plain_lse, ref_lse, lse_shape).max_abs,
                                            gpu_grading::max_abs_finite(ref_lse)));
}

std::vector<MergeCase> merge_cases(std::uint64_t seed) {
  using reference::Rng;
  std::vector<MergeCase> out;
  // LSE_s of ordinary size, with whole rows whose every split is empty (-inf) and rows where only
  // some are.
  out.push_back(make_merge("ordinary LSEs, rows 0 and 5 with every split empty, others with some", 37, 8, 128,
                           [](int s, int r, Rng& rng) {
                             if (r == 0 || r == 5) return kNegInf;
                             if ((r + s) % 3 == 0) return kNegInf;
                             return rng.normal() * 3;
                           },
                           seed));
  // One split: the merge is a copy (and a conversion to the dtype).
  out.push_back(make_merge("one split", 50, 1, 64, [](int, int r, Rng& rng) { return r == 7 ? kNegInf : rng.normal(); },
                           seed));
  // LSEs far apart: +-80 in one row (exp(160) overflows fp32 unless the max is subtracted first),
  // and rows far above or below 0 (exp(LSE) overflows or underflows to 0 without the max shift).
  out.push_back(make_merge("LSE values far apart: +-80, near +1000 and near -1000", 24, 5, 100,
                           [](int s, int r, Rng& rng) {
                             switch (r % 4) {
                               case 0: return (s % 2 ? 80.0 : -80.0) + rng.normal();
                               case 1: return 1000.0 + rng.normal();
                               case 2: return -1000.0 + rng.normal();
                               default: return s == 3 ? kNegInf : rng.normal() * 40;
                             }
                           },
                           seed));
  // Many splits (as the heuristic picks for a short batch), most of them empty in odd rows.
  out.push_back(make_merge("64 splits, most empty in odd rows", 9, 64, 128,
                           [](int s, int r, Rng& rng) { return (r % 2 && s % 16) ? kNegInf : rng.normal() * 2; },
                           seed));
  return out;
}

const char* kSmallFp32 = "fp32: small shapes match the fp64 reference";

}  // namespace

TEST_CASE("fp32: small shapes match the fp64 reference" * grading::points(4)) {
  gpu_grading::require_device();
  small_shapes(DType::fp32);
}

TEST_CASE("bf16: small shapes within band" * grading::points(3)) {
  gpu_grading::require_device();
  small_shapes(DType::bf16);
}

TEST_CASE("split counts 1 to 64, more splits than keys (empty splits)" * grading::points(3)) {
  gpu_grading::require_device();
  // 113 keys: no split count but 1 divides them, so the last chunk is short; at 16, 32, 63 and 64
  // splits the chunks of ceil(113 / S) keys run out before the last splits, which get no key.
  for (int splits : {1, 2, 3, 5, 8, 13, 16, 32, 63, 64}) check(decode(DType::fp32, 2, 2, 4, 113, 64, false, splits));
  for (int splits : {7, 64}) check(decode(DType::bf16, 1, 3, 1, 113, 128, true, splits));
  check(decode(DType::fp32, 1, 2, 2, 5, 128, false, 64));    // 5 keys, 64 splits
  check(decode(DType::fp32, 1, 2, 1, 5000, 64, false, 64));  // many keys per split
}

TEST_CASE("variable KV lengths (seqlens_k), including 0 and 1" * grading::points(3)) {
  gpu_grading::require_device();
  // Keys past a batch element's length hold ordinary values: reading them changes the result.
  const std::vector<int> lens = {0, 1, 2, 113, 299, 300};
  for (DType dtype : {DType::fp32, DType::bf16})
    for (int splits : {1, 4, 16})
      for (int nq : {1, 5}) check(decode(dtype, 6, 2, nq, 300, 64, false, splits, lens));
  check(decode(DType::fp32, 3, 2, 1, 64, 128, false, 3, {64, 0, 17}));
  // Lengths outside [0, Nk_max] are clamped into it (the API's promise): 260 of a cache of 200
  // reads the next batch element's keys unless clamped; -7 is an empty cache.
  check(decode(DType::fp32, 3, 2, 2, 200, 64, false, 4, {260, -7, 150}));
  check(decode(DType::bf16, 2, 1, 3, 200, 128, true, 3, {1 << 30, 90}));
}

TEST_CASE("causal with Nq > 1: bottom-right alignment with each batch element's length" * grading::points(3)) {
  gpu_grading::require_device();
  // Lengths below Nq leave the first Nq - len rows with no key: O = 0, LSE = -inf.
  const std::vector<int> lens = {0, 1, 3, 7, 16, 100, 300};
  for (DType dtype : {DType::fp32, DType::bf16})
    for (int nq : {2, 7, 16})
      for (int splits : {1, 3, 16}) check(decode(dtype, 7, 1, nq, 300, 64, true, splits, lens));
  check(decode(DType::fp32, 2, 2, 16, 40, 128, true, 5));  // no seqlens_k: every length is Nk_max
}

TEST_CASE("every output element is written (NaN-poisoned outputs and workspace)" * grading::points(2)) {
  gpu_grading::require_device();
  // Row counts B * H * Nq that are not multiples of 4 or of 16: no rounding of the rows up to a
  // block of them goes unseen.
  check(decode(DType::fp32, 1, 3, 1, 129, 64, false, 2));
  check(decode(DType::fp32, 3, 5, 3, 65, 128, false, 5));
  check(decode(DType::bf16, 1, 1, 13, 200, 64, false, 9));
}

TEST_CASE("the merge alone matches lab 2's combine in fp64 (empty splits, one split, LSEs far apart)" *
          grading::points(3)) {
  gpu_grading::require_device();
  const std::uint64_t seed = grading::seed();
  for (const MergeCase& m : merge_cases(seed))
    for (DType dtype : {DType::fp32, DType::bf16}) check_merge(m, dtype, seed);
}

TEST_CASE("long KV caches, many splits, and the library's own split count" * grading::points(2)) {
  gpu_grading::require_device();
  for (DType dtype : {DType::fp32, DType::bf16})
    for (int splits : {0, 32}) {
      Decode t = decode(dtype, 1, 4, 1, 16384, 128, false, splits);
      t.c.dist = reference::Distribution::outliers;
      check(t);
    }
  Decode t = decode(DType::bf16, 4, 2, 4, 9000, 64, true, 0, {9000, 1, 4321, 0});
  check(t);
}

TEST_CASE("numerics: large logits, rows far below zero, a maximum that grows along the keys" *
          grading::points(2, kSmallFp32)) {
  gpu_grading::require_device();
  using reference::Distribution;
  for (DType dtype : {DType::fp32, DType::bf16})
    for (auto dist : {Distribution::large_logits, Distribution::negative_rows, Distribution::increasing_scores})
      for (int nk : {3, 200})
        for (bool causal : {false, true}) {
          Decode t = decode(dtype, 2, 2, 4, nk, 64, causal, nk == 3 ? 2 : 7);
          t.c.dist = dist;
          check(t);
        }
}

TEST_CASE("deterministic and right for several seeds (no race)" * grading::points(2)) {
  gpu_grading::require_device();
  // A missing barrier (between the warps' states in shared memory and the final combine) shows up
  // as results that change from run to run.
  const std::uint64_t s = grading::seed() * 1000;
  for (std::uint64_t seed : {s, s + 1, s + 2}) {
    const Decode t = decode(DType::fp32, 2, 4, 16, 1500, 128, true, 6, {1500, 777});
    const gpu_grading::Inputs in = gpu_grading::make_inputs(t.c, seed);
    const gpu_grading::Outputs first = run_decode(t, in), second = run_decode(t, in);
    const grading::Case about{t.describe(), "fp32", {t.c.B, t.c.H, t.c.Nq, t.c.d}, t.c.describe(), seed};
    grading::expect(first.O == second.O && first.lse == second.lse, about,
                    "two runs on the same inputs gave different results: a race (a missing "
                    "__syncthreads, or a read of shared memory another warp is still writing)");
    gpu_grading::expect_matches(t.c, first, reference_for(t, in), t.describe(), seed);
  }
}

TEST_CASE("races: compute-sanitizer finds no race, barrier misuse or bad access" * grading::points(2, kSmallFp32)) {
  gpu_grading::require_device();
  // Both kernels (the splits and the merge) on small problems under compute-sanitizer
  // (grader/gpu/compute_sanitizer.hpp): several query rows, a length that is no multiple of
  // anything, empty splits, causal and not.
  const std::vector<Decode> shapes = {decode(DType::fp32, 2, 2, 4, 300, 64, true, 5, {300, 37}),
                                      decode(DType::bf16, 1, 2, 1, 150, 128, false, 64)};
  gpu_grading::check_under_compute_sanitizer(
      {"split_kv_forward", "fp32, bf16", {2, 2, 4, 64}, shapes[0].describe() + "; " + shapes[1].describe()},
      [&] {
        for (const Decode& t : shapes) check(t);
      });
}

TEST_CASE("inputs unchanged and scale honoured" * grading::points(2)) {
  gpu_grading::require_device();
  for (float scale : {0.3f, 1.0f, 0.0f}) {
    Decode t = decode(DType::fp32, 2, 2, 3, 150, 64, true, 4, {150, 90});
    t.c.scale = scale;
    const gpu_grading::Inputs in = gpu_grading::make_inputs(t.c, grading::seed());
    const gpu_grading::Outputs out = run_decode(t, in);
    grading::expect(out.inputs_unchanged, {t.describe(), "fp32", {t.c.B, t.c.H, t.c.Nq, t.c.d}, t.c.describe()},
                    "the kernel modified Q, K or V");
    gpu_grading::expect_matches(t.c, out, reference_for(t, in), t.describe(), grading::seed());
  }
}

namespace {
// Calls the entry point with a shape that must be rejected; returns only if nothing was thrown.
void bad_call(int Nq, int Nk_max, int d, int splits, bool null_q, std::uint64_t workspace_bytes, int which = 0) {
  decode_wire::DecodeCall call;
  call.base.B = which == 1 ? 16 : 1;  // the merge: rows
  call.base.H = 1;
  call.base.Nq = Nq;
  call.base.Nk = Nk_max;
  call.base.d = d;
  call.num_splits = splits;
  isolation::Packet args;
  decode_wire::put_decode(args, call);
  args.put<std::uint8_t>(null_q);
  args.put<std::uint64_t>(workspace_bytes);
  args.put<std::uint8_t>(std::uint8_t(which));
  isolation::lab().call("bad_arguments", args);
}
}  // namespace

TEST_CASE("bad input gets a clear error" * grading::points(2, kSmallFp32)) {
  gpu_grading::require_device();
  constexpr std::uint64_t kMiB = 1 << 20;
  CHECK_THROWS_AS(bad_call(1, 16, 48, 1, false, kMiB), course::BadInput);    // d = 48
  CHECK_THROWS_AS(bad_call(1, 16, 64, 1, true, kMiB), course::BadInput);     // Q null
  CHECK_THROWS_AS(bad_call(0, 16, 64, 1, false, kMiB), course::BadInput);    // Nq = 0
  CHECK_THROWS_AS(bad_call(17, 16, 64, 1, false, kMiB), course::BadInput);   // Nq = 17
  CHECK_THROWS_AS(bad_call(1, 0, 64, 1, false, kMiB), course::BadInput);     // Nk_max = 0
  CHECK_THROWS_AS(bad_call(1, 16, 64, -1, false, kMiB), course::BadInput);   // num_splits < 0
  CHECK_THROWS_AS(bad_call(4, 4096, 128, 8, false, 64), course::BadInput);   // workspace too small
  CHECK_THROWS_AS(bad_call(1, 16, 64, 0, false, kMiB, 1), course::BadInput);  // merge: 0 splits
  CHECK_THROWS_AS(bad_call(1, 16, 256, 2, false, kMiB, 1), course::BadInput);  // merge: d = 256
}
