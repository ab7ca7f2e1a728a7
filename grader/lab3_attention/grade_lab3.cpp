// Lab 3 grader: streaming attention on the CPU against the fp64 reference, and three properties
// that are measured rather than trusted:
//   memory  the peak heap bytes during a call stay O(N d + block_q block_k) (heap_meter), and
//           so does the lab process's peak resident memory, during the call and from its start
//           (the kernel's figure, resident_memory.hpp);
//   work    the multiplications counted by CountedFloat are 2 Nq Nk d + lower-order terms, and
//           about half of that under causal masking (so tiles are skipped, not masked); and the
//           CPU time the kernel charged to the lab process is about half too (the same rule,
//           measured where no code of the lab's can reach the measurement);
//   inputs  Q, K and V are unchanged by the call.
//
// Every numerical check draws fresh inputs from the run's seed (extra draws use seed + k, printed
// in the failure message), rounds them to the lab's dtype, and compares O and LSE with the fp64
// reference computed from the same rounded inputs, inside the band that
// grader/common/tolerances.cpp derives from the plain same-dtype attention.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attention_problem.hpp"
#include "cpu_time_ratio.hpp"
#include "compare.hpp"
#include "course/counted.hpp"
#include "course/lab3_attention.hpp"
#include "heap_meter.hpp"
#include "lab_process.hpp"
#include "reference/data.hpp"
#include "reference/reference.hpp"
#include "resident_memory.hpp"

using course::bf16;
using course::fp16;
using course::lab3::AttentionOptions;
using grading::Case;
using grading::Md;
using grading::Quantity;
using reference::Distribution;

namespace {

using Problem = grading::AttentionProblem;
using grading::describe;
using grading::scale_of;
using grading::causal;

AttentionOptions options_of(const Problem& p) { return grading::options_of<AttentionOptions>(p); }

// The inputs of a problem, in fp64, before rounding to the lab's dtype.
struct Inputs {
  Md Q, K, V;
};
Inputs draw(const Problem& p, std::uint64_t seed, const std::string& label) {
  reference::Rng rng(seed, "lab3/" + label);
  auto in = reference::attention_inputs(p.Nq, p.Nk, p.d, p.dist, rng);
  return {std::move(in.Q), std::move(in.K), std::move(in.V)};
}

enum class Compare { both, output_only, lse_only };

// attention_forward<T> on one problem against the fp64 reference, O and LSE each in its band.
template <class T, class Acc = course::accum_t<T>>
bool check_problem(const Problem& p, std::uint64_t seed, Compare what = Compare::both) {
  const std::string dtype = course::dtype_name<T>();
  const Inputs in = draw(p, seed, dtype);
  const Md Q = reference::round_to<T>(in.Q), K = reference::round_to<T>(in.K),
           V = reference::round_to<T>(in.V);
  const auto out = course::lab3::attention_forward<T, Acc>(
      grading::to_storage<T>(Q), grading::to_storage<T>(K), grading::to_storage<T>(V),
      options_of(p));
  const auto ref = reference::attention<double>(Q, K, V, scale_of(p), p.causal);
  const auto plain = reference::plain_attention<T>(Q, K, V, scale_of(p), p.causal);
  const std::string inputs = describe(p, seed);
  bool ok = true;
  if (what != Compare::lse_only) {
    const Case c{"attention_forward O", dtype, {long(p.Nq), long(p.d)}, inputs};
    const Md got = grading::to_double(out.O);
    if (grading::element_band_for(Quantity::output, dtype)) {
      // 16-bit O: also the per-element band of one rounding, its fp32 term set by a plain fp32
      // attention of the same rounded inputs.
      const auto plain32 = reference::plain_attention<float>(Q, K, V, scale_of(p), p.causal);
      ok &= grading::expect_close(c, Quantity::output, got, ref.O, plain.O, plain32.O);
    } else {
      ok &= grading::expect_close(c, Quantity::output, got, ref.O, plain.O);
    }
  }
  if (what != Compare::output_only)
    ok &= grading::expect_close({"attention_forward LSE", dtype, {long(p.Nq)}, inputs},
                                Quantity::lse, grading::to_double(out.lse), Md(ref.lse),
                                Md(plain.lse));
  return ok;
}

// The same problem with `draws` different seeds: seed(), seed() + 1, ...
template <class T>
void check_problems(const std::vector<Problem>& problems, int draws,
                    Compare what = Compare::both) {
  for (const Problem& p : problems)
    for (int k = 0; k < draws; ++k) check_problem<T>(p, grading::seed() + k, what);
}

// N in {1, 2, 3, 7, 64, 113, 1000}, d in {1, 16, 64, 128}; tiles that fit, that do not divide
// N, and that are larger than N. (N = 4096 has its own check: the reference is slow there.)
const std::vector<Problem> kSquare = {
    {1, 1, 16, 64, 64},     {2, 2, 1, 64, 64},      {3, 3, 64, 2, 2},
    {7, 7, 128, 4, 3},      {64, 64, 16, 64, 64},   {64, 64, 64, 16, 32},
    {113, 113, 16, 32, 16}, {113, 113, 128, 64, 64}, {1000, 1000, 64, 64, 64},
    {1000, 1000, 1, 128, 48},
};
const std::vector<Problem> kSmallSquare(kSquare.begin(), kSquare.end() - 2);

const char* kFp64 = "attention: fp64 matches reference";
const char* kFp32 = "attention: fp32 within band";
const char* kCausalFp64 = "causal: fp64 matches reference (Nq = Nk)";

}  // namespace

// --- Correctness against the fp64 reference -------------------------------------------------

TEST_CASE("attention: fp64 matches reference" * grading::points(3)) {
  check_problems<double>(kSmallSquare, 3);
  check_problems<double>({kSquare.end() - 2, kSquare.end()}, 1);
}

TEST_CASE("lse: fp64 and fp32 match reference" * grading::points(2)) {
  check_problems<double>(kSmallSquare, 2, Compare::lse_only);
  check_problems<float>(kSmallSquare, 2, Compare::lse_only);
}

TEST_CASE("attention: fp32 within band" * grading::points(2)) {
  check_problems<float>(kSmallSquare, 2);
  check_problems<float>({kSquare.end() - 2, kSquare.end()}, 1);
}

TEST_CASE("attention: bf16 within band (fp32 accumulation)" * grading::points(1)) {
  check_problems<bf16>(kSquare, 1);
}

TEST_CASE("attention: fp16 within band (fp32 accumulation)" * grading::points(1)) {
  check_problems<fp16>(kSquare, 1);
}

TEST_CASE("attention: block sizes that do not divide N (partial last tiles)" * grading::points(2)) {
  // Every problem has more than one key tile and a partial last one.
  const std::vector<Problem> ps = {
      {113, 113, 16, 16, 7}, {100, 100, 64, 64, 49}, {1000, 1000, 16, 96, 96},
      {7, 64, 16, 3, 5},     {64, 200, 32, 48, 48},
  };
  check_problems<double>(ps, 2);
  check_problems<float>(ps, 1);
}

TEST_CASE("attention: Nq != Nk" * grading::points(1)) {
  const std::vector<Problem> ps = {
      {1, 113, 64, 64, 64}, {113, 1, 16, 16, 16}, {37, 300, 64, 16, 64}, {300, 37, 16, 64, 8},
  };
  check_problems<double>(ps, 2);
  check_problems<bf16>(ps, 1);
}

TEST_CASE("attention: long sequences (N = 4096)" * grading::points(1)) {
  // Rows of 4096 keys: 64 rescalings per row, sums of 4096 terms. (One case: the fp64 reference
  // holds the whole 4096 x 4096 score matrix and is the slow part of this check.)
  check_problem<float>({4096, 4096, 16, 64, 64}, grading::seed());
}

TEST_CASE("attention: scale option honoured" * grading::points(1)) {
  std::vector<Problem> ps = {{64, 80, 16, 16, 16}, {33, 33, 64, 8, 8}};
  for (double s : {0.3, 2.0})
    for (Problem p : ps) {
      p.scale = s;
      check_problem<double>(p, grading::seed());
      check_problem<float>(p, grading::seed());
    }
}

TEST_CASE("numerics: large scores and outliers, no overflow or NaN" * grading::points(1)) {
  // Scores of +-1e3 (fp64) and +-1e2 (fp32) overflow exp without the max shift; outliers make
  // one key dominate a row, so the running max jumps late in the row.
  check_problem<double>({100, 300, 16, 32, 64, true, 300.0}, grading::seed());
  check_problem<double>({100, 300, 16, 32, 64, false, 300.0}, grading::seed());
  check_problem<float>({100, 300, 16, 32, 64, false, 30.0}, grading::seed());
  for (bool c : {false, true}) {
    // Odd rows' scores all near -1000: exp underflows unless the running max starts at -inf.
    check_problem<double>({100, 300, 16, 32, 64, c, std::nullopt, Distribution::negative_rows},
                          grading::seed());
    check_problem<float>({100, 300, 16, 32, 64, c, std::nullopt, Distribution::negative_rows},
                         grading::seed());
    check_problem<bf16>({100, 300, 16, 32, 64, c, std::nullopt, Distribution::negative_rows},
                        grading::seed());
    check_problem<float>({200, 200, 16, 32, 32, c, std::nullopt, Distribution::large_scores},
                         grading::seed());
    check_problem<double>({200, 200, 64, 32, 32, c, std::nullopt, Distribution::outliers},
                          grading::seed());
    check_problem<float>({200, 200, 64, 32, 32, c, std::nullopt, Distribution::outliers},
                         grading::seed());
  }
}

// --- Causal masking ----------------------------------------------------------------------------

TEST_CASE("causal: fp64 matches reference (Nq = Nk)" * grading::points(3)) {
  check_problems<double>(causal(kSmallSquare), 2);
  check_problems<double>(causal({kSquare.end() - 2, kSquare.end()}), 1);
}

TEST_CASE("causal: Nq != Nk aligned bottom-right; rows with no key give O = 0, LSE = -inf" *
          grading::points(2)) {
  // Nq > Nk: the first Nq - Nk queries see no key at all (their O is 0, their LSE -inf).
  const std::vector<Problem> ps = grading::causal_unequal_lengths();
  check_problems<double>(ps, 2);
  check_problems<float>(ps, 1);
  check_problems<fp16>(ps, 1);
}

TEST_CASE("causal: fp32, bf16, fp16 within band" * grading::points(1)) {
  check_problems<float>(causal(kSquare), 1);
  check_problems<bf16>(causal(kSquare), 1);
  check_problems<fp16>(causal(kSmallSquare), 1);
  check_problem<bf16>({1024, 4096, 16, 128, 64, true}, grading::seed());  // long rows
}

// --- Memory: measured peak heap bytes ----------------------------------------------------------

TEST_CASE("memory: peak heap stays O(N*d + block_q*block_k)" * grading::points(3, kFp32)) {
  if (!grading::HeapMeter::available())
    grading::skip("the heap meter could not interpose malloc on this platform");
  // block_q x Nk would already break the bound here: block_q is much larger than 2 d.
  // The last problem has far more keys than queries: a copy of K and V (a "tile" of all keys)
  // is 2 MiB there, the bound about 0.3 MiB.
  const std::vector<Problem> ps = {{4096, 4096, 16, 128, 32},
                                   {1000, 4096, 16, 128, 32, true},
                                   {4096, 1000, 16, 256, 16},
                                   {256, 16384, 16, 64, 64}};
  for (const Problem& p : ps) {
    const Inputs in = draw(p, grading::seed(), "memory");
    const course::Matrix<float> Q = grading::to_storage<float>(in.Q),
                                K = grading::to_storage<float>(in.K),
                                V = grading::to_storage<float>(in.V);
    // A fresh lab process for each problem: nothing an earlier check left allocated (a static
    // score buffer grown before, say) can hide from the meter.
    isolation::lab().restart();
    isolation::lab().call("ping", {});
    const long rss_before = isolation::lab().peak_rss_bytes();
    long peak = 0;
    {
      grading::HeapMeter meter;
      const auto out = course::lab3::attention_forward<float>(Q, K, V, options_of(p));
      peak = meter.peak_bytes();
    }
    const long rss_after = isolation::lab().peak_rss_bytes();
    // The bound, term by term: the outputs the call must return; per query row, a copy of Q
    // and the running O, m and l in the accumulation type (what FA1's K/V-outer loop order
    // keeps; the solution keeps only a tile of them); a few tiles; 64 KiB slack for the
    // allocator and small bookkeeping. Nothing grows with Nk: keys arrive block_k at a time.
    const long acc = sizeof(float), Nq = p.Nq, Nk = p.Nk, d = p.d;
    const long bq = std::min<long>(p.block_q, Nq), bk = std::min<long>(p.block_k, Nk);
    const long outputs = Nq * d * long(sizeof(float)) + Nq * acc;
    const long copies = 2 * Nq * (d + 2) * acc;
    const long tiles = 4 * bq * bk * acc + 4 * (bq + bk) * (d + 2) * acc;
    const long slack = 64 * 1024;
    const long bound = outputs + copies + tiles + slack;
    grading::expect(peak <= bound,
                    {"attention_forward", "fp32", {Nq, d}, describe(p, grading::seed())},
                    "peak heap during the call was " + std::to_string(peak) +
                        " bytes, which exceeds the allowed O(N*d + block_q*block_k) bound of " +
                        std::to_string(bound) + " bytes (outputs " + std::to_string(outputs) +
                        " + 2 Nq (d + 2) fp32 per-query copies " + std::to_string(copies) +
                        " + 4 tiles " + std::to_string(tiles) + " + slack " +
                        std::to_string(slack) + "); for scale: an Nq x Nk score matrix is " +
                        std::to_string(Nq * Nk * acc) + " bytes, a block_q x Nk one " +
                        std::to_string(bq * Nk * acc) + ", a copy of K and V " +
                        std::to_string(2 * Nk * d * acc));
    // The same bound, measured by the kernel rather than by the lab process's own counting:
    // its peak resident memory, during the call and from its start (resident_memory.hpp). It
    // also holds the inputs and outputs as the lab process's server decodes and encodes them
    // (twice each), and a few MiB of pages; it is a backstop for memory the heap meter cannot
    // see (static arrays, memory mapped directly, an operator new of the lab's own).
    const long io = 2 * long(sizeof(float)) * (Nq + 2 * Nk) * d + 3 * outputs;
    const long rss_bound = bound + io + (4 << 20);
    grading::expect_resident_memory(
        {"attention_forward", "fp32", {Nq, d}, describe(p, grading::seed())}, rss_before,
        rss_after, rss_bound,
        "the O(N*d + block_q*block_k) bound plus its inputs and outputs and 4 MiB");
  }
}

// --- Work: multiplications counted by CountedFloat ---------------------------------------------

namespace {

// Runs attention_forward<float, CountedFloat> on p, checks its O against the reference (so the
// count belongs to a correct computation), and returns the number of multiplications.
std::uint64_t counted_multiplications(const Problem& p) {
  const Inputs in = draw(p, grading::seed(), "work");
  const Md Q = reference::round_to<float>(in.Q), K = reference::round_to<float>(in.K),
           V = reference::round_to<float>(in.V);
  std::uint64_t& counter = course::CountedFloat::multiplications();
  counter = 0;
  const auto out = course::lab3::attention_forward<float, course::CountedFloat>(
      grading::to_storage<float>(Q), grading::to_storage<float>(K), grading::to_storage<float>(V),
      options_of(p));
  const std::uint64_t n = counter;
  const auto ref = reference::attention<double>(Q, K, V, scale_of(p), p.causal);
  const auto plain = reference::plain_attention<float>(Q, K, V, scale_of(p), p.causal);
  grading::expect_close({"attention_forward<float, CountedFloat> O", "fp32",
                         {long(p.Nq), long(p.d)}, describe(p, grading::seed())},
                        Quantity::output, grading::to_double(out.O), ref.O, plain.O);
  return n;
}

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

}  // namespace

TEST_CASE("work: non-causal does 2*Nq*Nk*d multiplications (counted)" *
          grading::points(2, kFp32)) {
  // S = Q K^T needs Nq Nk d products and P V another Nq Nk d; everything else (the scale, the
  // rescaling of O and l once per key tile, the final division) is of lower order.
  const std::vector<Problem> ps = {{300, 300, 16, 64, 64}, {200, 333, 64, 64, 48},
                                   {128, 100, 16, 32, 64}};
  for (const Problem& p : ps) {
    const double Nq = p.Nq, Nk = p.Nk, d = p.d;
    const double tiles = std::ceil(Nk / std::min(p.block_k, p.Nk));
    const double expected = 2 * Nq * Nk * d;
    const double lower = 0.99 * expected;
    const double upper = expected + 2 * Nq * Nk + Nq * (tiles + 1) * (2 * d + 4) + 2 * (Nq + Nk) * d;
    const double n = double(counted_multiplications(p));
    grading::expect(n >= lower && n <= upper,
                    {"attention_forward<float, CountedFloat>", "fp32", {p.Nq, p.d},
                     describe(p, grading::seed())},
                    fmt(n) + " multiplications counted, outside [" + fmt(lower) + ", " +
                        fmt(upper) + "]: expected 2 Nq Nk d = " + fmt(expected) +
                        " plus lower-order terms (" +
                        (n < lower ? "too few: some scores or some of P V were not computed"
                                   : "too many: work beyond S = Q K^T and P V") +
                        ")");
  }
}

TEST_CASE("work: causal skips tiles above the diagonal (about half the work)" *
          grading::points(1, kCausalFp64)) {
  // Measured against the same problem without the mask. With T key tiles per row the tiles on
  // or below the diagonal are (T + 1) / (2 T) of all; the entries a row sees are the floor.
  // These are the products CountedFloat saw; the next check holds the same rule to the CPU time
  // the kernel measured, which also sees work done in another type or on another thread.
  const std::vector<Problem> ps = {{1024, 1024, 16, 32, 32}, {512, 1024, 16, 32, 32},
                                   {1024, 512, 16, 64, 16}};
  for (Problem p : ps) {
    p.causal = false;
    const double full = double(counted_multiplications(p));
    p.causal = true;
    const double masked = double(counted_multiplications(p));
    // Exact fractions for this shape: visible (i, j) pairs, and the tiles a tile-skipping
    // implementation computes (key tiles up to the last key the query tile's last row sees).
    double visible = 0, tile_keys = 0;
    for (long i = 0; i < p.Nq; ++i) visible += std::clamp<long>(i + p.Nk - p.Nq + 1, 0, p.Nk);
    for (long q0 = 0; q0 < p.Nq; q0 += p.block_q) {
      const long rows = std::min<long>(p.block_q, p.Nq - q0);
      tile_keys += double(rows) * std::clamp<long>(q0 + rows + p.Nk - p.Nq, 0, p.Nk);
    }
    const double cells = double(p.Nq) * p.Nk;
    const double lower = visible / cells - 0.03, upper = tile_keys / cells + 0.05;
    const double ratio = masked / full;
    grading::expect(ratio >= lower && ratio <= upper,
                    {"attention_forward<float, CountedFloat>", "fp32", {p.Nq, p.d},
                     describe(p, grading::seed())},
                    "causal/non-causal multiplication ratio " + fmt(ratio) + " (" + fmt(masked) +
                        " / " + fmt(full) + ") is outside [" + fmt(lower) + ", " + fmt(upper) +
                        "]: " +
                        (ratio > upper
                             ? "tiles above the diagonal must be skipped, not computed and masked"
                             : "less work than the keys the rows see: visible scores were skipped"));
  }
}

namespace {

// One problem of the timed calls: its inputs in fp32, the reference O and the plain fp32
// attention that sets its band (computed once, for every round that calls it).
struct TimedProblem {
  Problem p;
  course::Matrix<float> Q, K, V;
  Md O, plain_O;
};

TimedProblem timed_problem(const Problem& p, const std::string& label) {
  const Inputs in = draw(p, grading::seed(), label);
  const Md Q = reference::round_to<float>(in.Q), K = reference::round_to<float>(in.K),
           V = reference::round_to<float>(in.V);
  return {p,
          grading::to_storage<float>(Q),
          grading::to_storage<float>(K),
          grading::to_storage<float>(V),
          reference::attention<double>(Q, K, V, scale_of(p), p.causal).O,
          reference::plain_attention<float>(Q, K, V, scale_of(p), p.causal).O};
}

// Restarts the lab process and warms it with a small call, so that neither its start (its
// libraries, its static constructors) nor anything an earlier round left behind is charged to
// the calls timed next, and nothing an earlier round computed can be reused.
void fresh_lab_process(int d) {
  const Problem warm_up{64, 64, d, 64, 64};
  const course::Matrix<float> small = course::Matrix<float>::Ones(warm_up.Nq, warm_up.d);
  isolation::lab().restart();
  (void)course::lab3::attention_forward<float>(small, small, small, options_of(warm_up));
}

// The CPU time, in seconds, that the kernel charged to the lab process for one call of
// attention_forward<float> on x: user and system time of all its threads, ended or not. The
// output is compared with the reference, so that the time belongs to a correct computation;
// nullopt when it is wrong (the check has failed).
std::optional<double> timed_call(const TimedProblem& x) {
  const double before = isolation::lab().cpu_seconds();
  const auto out = course::lab3::attention_forward<float>(x.Q, x.K, x.V, options_of(x.p));
  const double after = isolation::lab().cpu_seconds();
  if (!grading::expect_close({"attention_forward O (timed)", "fp32", {long(x.p.Nq), long(x.p.d)},
                              describe(x.p, grading::seed())},
                             Quantity::output, grading::to_double(out.O), x.O, x.plain_O))
    return std::nullopt;
  return after - before;
}

}  // namespace

TEST_CASE("work: causal skips tiles above the diagonal (CPU time measured)" *
          grading::points(2, kCausalFp64)) {
  // The rule of the check above, measured by the kernel instead of CountedFloat
  // (grader/common/cpu_time_ratio.hpp): the CPU time of attention_forward<float> with the causal
  // mask against the same shape without it, six calls a side in a round. At N = 1024, d = 64
  // (K and V, 512 KiB, stay in L2) there are T = 16 key tiles per row, so the tiles on or below
  // the diagonal are 17/32 = 0.53 of all: a code that skips the others takes about half the time
  // (the solution measures 0.46 to 0.62 a round), one that computes and masks them about as long.
  grading::skip_under_address_sanitizer();
  const Problem full{1024, 1024, 64, 64, 64};
  Problem masked = full;
  masked.causal = true;
  const double tiles = full.Nk / full.block_k;  // key tiles per row, all full
  constexpr int kCalls = 6;
  std::vector<TimedProblem> masked_calls, full_calls;
  for (int i = 0; i < kCalls; ++i) {
    masked_calls.push_back(timed_problem(masked, "cpu time, causal " + std::to_string(i)));
    full_calls.push_back(timed_problem(full, "cpu time, not causal " + std::to_string(i)));
  }
  const auto ratio = grading::measure_cpu_time_ratio(
      kCalls, {"attention_forward", "fp32", {full.Nq, full.d}, describe(full, grading::seed())},
      [&] { fresh_lab_process(full.d); },
      [&](bool causal, int i) { return timed_call(causal ? masked_calls[i] : full_calls[i]); });
  if (ratio)
    grading::expect_causal_cpu_time(*ratio, {"attention_forward", "fp32", {masked.Nq, masked.d},
                                             describe(masked, grading::seed())},
                                    (tiles + 1) / (2 * tiles));
}

TEST_CASE("streaming: keys in tiles of block_k, each tile rescales (exponentials counted)" *
          grading::points(2, kFp32)) {
  // Scores that climb along the keys: the running max grows in every key tile, so a row's
  // statistics are rescaled once per tile (one exponential, exp(m_old - m_new)) besides one
  // exponential per score. Code that takes all keys at once (block_k ignored) rescales once
  // per row; code that never rescales is wrong. Counted with CountedFloat's exponentials().
  const std::vector<Problem> ps = {
      {64, 256, 16, 16, 16, false, std::nullopt, Distribution::increasing_scores},
      {50, 200, 16, 64, 24, false, std::nullopt, Distribution::increasing_scores},
  };
  for (const Problem& p : ps) {
    std::uint64_t& counter = course::CountedFloat::exponentials();
    counter = 0;
    (void)counted_multiplications(p);  // also checks O against the reference
    const double n = double(counter);
    const double Nq = p.Nq, Nk = p.Nk, tiles = std::ceil(double(p.Nk) / p.block_k);
    // Lower: one exponential per score, one rescale per tile after the first. Upper: FA1's
    // form (exp(m_tile - m_new) and exp(m_old - m_new) per tile) and a few per row.
    const double lower = Nq * Nk + Nq * (tiles - 1), upper = Nq * Nk + 3 * Nq * tiles + 2 * Nq;
    grading::expect(n >= lower && n <= upper,
                    {"attention_forward<float, CountedFloat>", "fp32", {p.Nq, p.d},
                     describe(p, grading::seed())},
                    fmt(n) + " exponentials counted, outside [" + fmt(lower) + ", " + fmt(upper) +
                        "]: expected one per score (Nq Nk = " + fmt(Nq * Nk) +
                        ") plus one rescale per row and key tile (" + fmt(tiles) +
                        " tiles of block_k): " +
                        (n < Nq * Nk ? grading::uncounted_exponentials_note()
                         : n < lower ? "too few: block_k is not honoured, or the running m, l "
                                       "and O are not rescaled when the max grows"
                                     : "too many: scores exponentiated more than once"));
  }
}

// --- Adversarial: inputs, batches, bad input ---------------------------------------------------

namespace {
template <class T>
void check_inputs_unchanged(const Problem& p) {
  const Inputs in = draw(p, grading::seed(), "unchanged");
  const course::Matrix<T> Q = grading::to_storage<T>(in.Q), K = grading::to_storage<T>(in.K),
                          V = grading::to_storage<T>(in.V);
  course::Matrix<T> Qc = Q, Kc = K, Vc = V;
  (void)course::lab3::attention_forward<T>(Qc, Kc, Vc, options_of(p));
  // const_cast would let a solution scribble on its inputs; compare bit for bit.
  auto same = [](const course::Matrix<T>& a, const course::Matrix<T>& b) {
    return a.rows() == b.rows() && a.cols() == b.cols() &&
           std::equal(a.data(), a.data() + a.size(), b.data(), [](T x, T y) {
             return static_cast<double>(x) == static_cast<double>(y);
           });
  };
  const Case c{"attention_forward inputs", course::dtype_name<T>(), {p.Nq, p.d},
               describe(p, grading::seed())};
  grading::expect(same(Q, Qc), c, "Q was modified by the call");
  grading::expect(same(K, Kc), c, "K was modified by the call");
  grading::expect(same(V, Vc), c, "V was modified by the call");
}
}  // namespace

TEST_CASE("inputs: Q, K and V are unchanged by the call" * grading::points(1, kFp64)) {
  check_inputs_unchanged<float>({100, 77, 16, 16, 16, true});
  check_inputs_unchanged<bf16>({64, 64, 64, 32, 32, false});
  check_inputs_unchanged<double>({33, 50, 8, 7, 9, true});
}

namespace {
template <class T>
void check_batched(int B, int H, const Problem& p) {
  const std::string dtype = course::dtype_name<T>();
  course::Tensor4<T> Q(B, H, p.Nq, p.d), K(B, H, p.Nk, p.d), V(B, H, p.Nk, p.d);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const Inputs in = draw(p, grading::seed() + 7 * b + h, "batched/" + dtype);
      Q.head(b, h) = grading::to_storage<T>(in.Q);
      K.head(b, h) = grading::to_storage<T>(in.K);
      V.head(b, h) = grading::to_storage<T>(in.V);
    }
  const auto out = course::lab3::attention_forward_batched<T>(Q, K, V, options_of(p));
  const Case shape_case{"attention_forward_batched", dtype, {B, H, p.Nq, p.d}, describe(p, grading::seed())};
  if (!grading::expect(out.O.B == B && out.O.H == H && out.O.N == p.Nq && out.O.d == p.d &&
                           out.O.data.size() == std::size_t(B) * H * p.Nq * p.d &&
                           out.lse.size() == std::size_t(B) * H * p.Nq,
                       shape_case, "O must be [B, H, Nq, d] and lse [B, H, Nq]"))
    return;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const auto one = course::lab3::attention_forward<T>(course::Matrix<T>(Q.head(b, h)),
                                                          course::Matrix<T>(K.head(b, h)),
                                                          course::Matrix<T>(V.head(b, h)),
                                                          options_of(p));
      const std::string where = describe(p, grading::seed()) + ", head (b " + std::to_string(b) +
                                ", h " + std::to_string(h) + ") vs attention_forward of that head";
      const Md per_head_O = grading::to_double(one.O);
      grading::expect_close({"attention_forward_batched O", dtype, {long(p.Nq), long(p.d)}, where},
                            Quantity::output, grading::to_double(out.O.head(b, h)), per_head_O,
                            per_head_O);
      Md lse(p.Nq, 1), per_head_lse = grading::to_double(one.lse);
      for (int i = 0; i < p.Nq; ++i)
        lse(i, 0) = double(out.lse[(std::size_t(b) * H + h) * p.Nq + i]);
      grading::expect_close({"attention_forward_batched LSE", dtype, {long(p.Nq)}, where},
                            Quantity::lse, lse, per_head_lse, per_head_lse);
    }
}
}  // namespace

TEST_CASE("batched: [B, H, N, d] equals attention per head" * grading::points(1, kFp64)) {
  check_batched<double>(2, 3, {37, 50, 16, 16, 8, true});
  check_batched<float>(2, 2, {64, 64, 32, 32, 32, false});
  check_batched<bf16>(1, 3, {50, 37, 16, 8, 16, true});
  check_batched<fp16>(3, 1, {20, 20, 64, 7, 7, true});
}

TEST_CASE("errors: bad input throws course::BadInput" * grading::points(1, kFp64)) {
  using course::BadInput;
  using M = course::Matrix<float>;
  using course::lab3::attention_forward;
  const M Q = M::Ones(4, 8), K = M::Ones(5, 8), V = M::Ones(5, 8);
  AttentionOptions ok;
  CHECK_THROWS_AS(attention_forward<float>(Q, M::Ones(5, 7), V, ok), BadInput);  // d differs
  CHECK_THROWS_AS(attention_forward<float>(Q, K, M::Ones(6, 8), ok), BadInput);  // Nk differs
  CHECK_THROWS_AS(attention_forward<float>(M(4, 0), M(5, 0), M(5, 0), ok), BadInput);  // d = 0
  AttentionOptions bad_q = ok, bad_k = ok;
  bad_q.block_q = 0;
  bad_k.block_k = -3;
  CHECK_THROWS_AS(attention_forward<float>(Q, K, V, bad_q), BadInput);
  CHECK_THROWS_AS(attention_forward<float>(Q, K, V, bad_k), BadInput);
  const float inf = std::numeric_limits<float>::infinity();
  // Every (value, tensor) pair: NaN, +inf and -inf in each of Q, K and V.
  for (float bad : {std::nanf(""), inf, -inf}) {
    M q = Q, k = K, v = V;
    q(2, 3) = bad;
    CHECK_THROWS_AS(attention_forward<float>(q, K, V, ok), BadInput);
    k(4, 0) = bad;
    CHECK_THROWS_AS(attention_forward<float>(Q, k, V, ok), BadInput);
    v(0, 7) = bad;
    CHECK_THROWS_AS(attention_forward<float>(Q, K, v, ok), BadInput);
  }
  course::Tensor4<float> q4(2, 2, 4, 8), k4(2, 3, 5, 8), v4(2, 3, 5, 8);
  CHECK_THROWS_AS(course::lab3::attention_forward_batched<float>(q4, k4, v4, ok), BadInput);
  CHECK_NOTHROW(attention_forward<float>(Q, K, V, ok));
}
