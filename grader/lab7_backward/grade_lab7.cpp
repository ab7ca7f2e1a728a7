// Lab 7 grader: the attention backward pass against the fp64 reference.
//
// Part 1, attention_backward on the CPU (the checks below): dQ, dK and dV against the fp64
// reference's gradients, inside the bands that grader/common/tolerances.cpp derives from a plain
// same-dtype backward on the same inputs, and properties that are measured rather than trusted:
//   memory      the peak heap bytes during a call stay O(N d + block_q block_k) (heap meter),
//               and so does the lab process's peak resident memory, during the call and from
//               its start (the kernel's figure, resident_memory.hpp);
//   work        CountedFloat counts one exponential per score (P recomputed once, from the
//               saved LSE) and 5 Nq Nk d multiplications, and causal masking skips the tiles
//               above the diagonal;
//   statistics  D comes from the given O, and P from the given LSE.
// Part 2, flash_attention_backward on the GPU (the section at the end): the same inputs, reference
// and bands, head by head, with the GPU labs' harness (NaN guard zones and poisoned outputs, a busy
// default stream); its checks skip where no CUDA device (or no CUDA compiler) is found.
// Part 3, the same function on tensor cores (BackwardKernel::tensor_cores, the "tc: ..." checks):
// bf16 and fp16, graded like part 2 except that the fp32 term of the per-element band comes from
// a plain backward that rounds P and dS to the 16-bit type, as the tensor cores' operands are
// (plain_tensor_core_backward).
//
// The inputs of a problem: Q, K, V and dO drawn from the run's seed (extra draws use seed + k,
// printed in the failure message) and rounded to the lab's dtype; O and LSE as a forward pass in
// that dtype saves them: the fp64 reference forward of the rounded Q, K and V, O rounded to the
// dtype and LSE to its accumulation type. The reference gradients are those of the definitions
// (reference::attention_backward) at the same rounded Q, K, V and dO.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_problem.hpp"
#include "backward_bands.hpp"      // LabInputs, lab_inputs, compare_gradients (shared with lab 9)
#include "backward_gpu_checks.hpp"  // parts 2 and 3: run_gpu, check_gpu, ... (shared with lab 9)
#include "compare.hpp"
#include "cpu_time_ratio.hpp"
#include "course/counted.hpp"
#include "course/lab7_backward.hpp"
#include "heap_meter.hpp"
#include "lab_process.hpp"
#include "reference/data.hpp"
#include "reference/reference.hpp"
#include "resident_memory.hpp"

using course::bf16;
using course::fp16;
using course::lab7::BackwardOptions;
using grading::Case;
using grading::Md;
using grading::Quantity;
using reference::Distribution;
using namespace backward_grading;

// --- Part 1: attention_backward on the CPU ------------------------------------------------------

namespace {

using Problem = grading::AttentionProblem;
using Grads = reference::AttentionGradients<double>;
using grading::describe;
using grading::scale_of;
using grading::causal;

BackwardOptions options_of(const Problem& p) { return grading::options_of<BackwardOptions>(p); }

// attention_backward<T, Acc> of the lab (in the lab process) on these inputs, as fp64 values.
template <class T, class Acc = course::accum_t<T>>
Grads run_lab(const LabInputs& x, const Problem& p) {
  using grading::to_storage;
  const auto g = course::lab7::attention_backward<T, Acc>(
      to_storage<T>(x.Q), to_storage<T>(x.K), to_storage<T>(x.V), to_storage<T>(x.O),
      to_storage<T>(x.dO), x.lse.cast<course::accum_t<T>>(), options_of(p));
  return {grading::to_double(g.dQ), grading::to_double(g.dK), grading::to_double(g.dV)};
}

// attention_backward<T, Acc> on one problem against the fp64 reference.
template <class T, class Acc = course::accum_t<T>>
bool check_problem(const Problem& p, std::uint64_t seed) {
  const LabInputs x = lab_inputs<T>(p, seed, course::dtype_name<T>());
  const Grads got = run_lab<T, Acc>(x, p);
  const Grads ref =
      reference::attention_backward<double>(x.Q, x.K, x.V, x.dO, scale_of(p), p.causal);
  return compare_gradients<T>(got, ref, x, p, describe(p, seed));
}

// The same problems with `draws` different seeds each: seed(), seed() + 1, ...
template <class T>
void check_problems(const std::vector<Problem>& problems, int draws) {
  for (const Problem& p : problems)
    for (int k = 0; k < draws; ++k) check_problem<T>(p, grading::seed() + k);
}

// N in {1, 2, 3, 7, 50, 64, 113, 256}, d in {1, 16, 64, 128}; tiles of 1, tiles that fit, that
// do not divide N and that are larger than N. Two problems have many key tiles (50 of one key, 16
// of 16 keys), so that an error added per key tile (dQ rounded to the storage type after each
// one) adds up.
const std::vector<Problem> kSquare = {
    {1, 1, 16, 64, 64},    {2, 2, 1, 64, 64},     {3, 3, 64, 2, 2},      {7, 7, 128, 4, 3},
    {50, 50, 16, 1, 1},    {64, 64, 16, 64, 64},  {64, 64, 64, 16, 32},  {113, 113, 16, 32, 16},
    {113, 113, 64, 64, 64}, {256, 256, 64, 32, 16},
};
const std::vector<Problem> kSmallSquare(kSquare.begin(), kSquare.end() - 1);

const char* kFp64 = "backward: fp64 matches reference";
const char* kFp32 = "backward: fp32 within band";
const char* kCausalFp64 = "causal: fp64 matches reference (Nq = Nk)";

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

}  // namespace

// --- Correctness against the fp64 reference ----------------------------------------------------

TEST_CASE("backward: fp64 matches reference" * grading::points(3)) {
  check_problems<double>(kSmallSquare, 2);
  check_problem<double>(kSquare.back(), grading::seed());
}

TEST_CASE("backward: fp32 within band" * grading::points(2)) {
  check_problems<float>(kSquare, 1);
}

TEST_CASE("backward: bf16 within band (fp32 accumulation)" * grading::points(1)) {
  check_problems<bf16>(kSquare, 1);
}

TEST_CASE("backward: fp16 within band (fp32 accumulation)" * grading::points(1)) {
  check_problems<fp16>(kSquare, 1);
}

TEST_CASE("backward: block sizes that do not divide N (partial last tiles)" * grading::points(2)) {
  // Every problem has more than one tile of each kind and a partial last one.
  const std::vector<Problem> ps = {
      {113, 113, 16, 16, 7}, {100, 100, 64, 64, 49}, {300, 300, 16, 96, 96},
      {7, 64, 16, 3, 5},     {64, 200, 32, 48, 48},  {200, 64, 32, 48, 48},
  };
  check_problems<double>(ps, 2);
  check_problems<float>(ps, 1);
}

TEST_CASE("backward: Nq != Nk" * grading::points(1)) {
  const std::vector<Problem> ps = {
      {1, 113, 64, 64, 64}, {113, 1, 16, 16, 16}, {37, 300, 64, 16, 64}, {300, 37, 16, 64, 8},
  };
  check_problems<double>(ps, 2);
  check_problems<bf16>(ps, 1);
}

TEST_CASE("backward: scale option honoured" * grading::points(1)) {
  std::vector<Problem> ps = {{64, 80, 16, 16, 16}, {33, 33, 64, 8, 8}, {20, 30, 1, 8, 8}};
  for (double s : {0.3, 2.0})
    for (Problem p : ps) {
      p.scale = s;
      check_problem<double>(p, grading::seed());
      check_problem<float>(p, grading::seed());
    }
}

TEST_CASE("numerics: large scores, no overflow or NaN (P from the saved LSE)" *
          grading::points(1)) {
  // Scores of +-1e3 (fp64) and +-1e2 (fp32): exp(S) alone overflows, exp(S - LSE) never exceeds
  // 1. Rows whose scores all lie near -1000: exp(S) underflows to 0, exp(S - LSE) does not.
  // Outliers: one key dominates a row, its P is near 1 and the rest near 0.
  for (bool c : {false, true}) {
    check_problem<double>({100, 300, 16, 32, 64, c, 300.0}, grading::seed());
    check_problem<float>({100, 300, 16, 32, 64, c, 30.0}, grading::seed());
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
  check_problem<double>(causal({kSquare.back()})[0], grading::seed());
}

TEST_CASE("causal: Nq != Nk aligned bottom-right; rows with no key give dQ = 0, never NaN" *
          grading::points(2)) {
  // Nq > Nk: the first Nq - Nk queries see no key (LSE = -inf): their dQ is 0 and they add
  // nothing to dK and dV. In the first two problems a query tile holds rows of both kinds.
  const std::vector<Problem> ps = grading::causal_unequal_lengths();
  check_problems<double>(ps, 2);
  check_problems<float>(ps, 1);
  check_problems<fp16>(ps, 1);
}

TEST_CASE("causal: fp32, bf16, fp16 within band" * grading::points(1)) {
  check_problems<float>(causal(kSquare), 1);
  check_problems<bf16>(causal(kSquare), 1);
  check_problems<fp16>(causal(kSquare), 1);
}

// --- The saved statistics are used as given ----------------------------------------------------

TEST_CASE("statistics: D from the given O, P from the given LSE" * grading::points(1, kFp64)) {
  // The API defines the gradients from O and LSE as given: D = rowsum(dO o O), P = exp(S - LSE).
  // Here they are not the forward's (O moved by noise, each finite LSE by up to +-1/2), so code
  // that recomputes the row statistics itself (a first pass over the keys for LSE, or D as
  // rowsum(P o dP)) gives other numbers. The reference is FA2's formulas with full matrices in
  // fp64 (reference::plain_attention_backward<double>).
  for (const Problem& p : {Problem{64, 80, 16, 16, 16, true}, Problem{100, 100, 32, 32, 64}}) {
    LabInputs x = lab_inputs<double>(p, grading::seed(), "statistics");
    reference::Rng rng(grading::seed(), "lab7/statistics/noise");
    x.O += 0.25 * reference::random_matrix(p.Nq, p.d, Distribution::normal, rng);
    for (Eigen::Index i = 0; i < x.lse.size(); ++i)
      if (std::isfinite(x.lse(i))) x.lse(i) += rng.uniform() - 0.5;
    const Grads got = run_lab<double>(x, p);
    const Grads ref = reference::plain_attention_backward<double>(x.Q, x.K, x.V, x.O, x.dO, x.lse,
                                                                 scale_of(p), p.causal);
    compare_gradients<double>(got, ref, x, p,
                              describe(p, grading::seed()) + ", O and LSE moved off the forward's");
  }
}

// --- Memory: measured peak heap bytes ----------------------------------------------------------

TEST_CASE("memory: peak heap stays O(N*d + block_q*block_k)" * grading::points(3, kFp32)) {
  if (!grading::HeapMeter::available())
    grading::skip("the heap meter could not interpose malloc on this platform");
  // d is small, so that the N x N and block x N buffers stand out against the O(N d) that is
  // allowed: at N = 2048 the score matrix is 16 MiB, a tile of P for all queries 512 KiB, the
  // bound about 0.6 MiB.
  const std::vector<Problem> ps = {{2048, 2048, 8, 64, 64}, {1024, 2048, 8, 32, 64, true}};
  for (const Problem& p : ps) {
    const LabInputs x = lab_inputs<float>(p, grading::seed(), "memory");
    // A fresh lab process for each problem: nothing an earlier check left allocated (a static
    // buffer grown before, say) can hide from the meter.
    isolation::lab().restart();
    isolation::lab().call("ping", {});
    const long rss_before = isolation::lab().peak_rss_bytes();
    long peak = 0;
    {
      grading::HeapMeter meter;
      (void)run_lab<float>(x, p);
      peak = meter.peak_bytes();
    }
    const long rss_after = isolation::lab().peak_rss_bytes();
    // The bound, term by term: the outputs the call must return (dQ, dK, dV in fp32); per query
    // row, dQ and D in the accumulation type and one more number (a row statistic), and per key
    // row dK and dV (what the query-outer loop order keeps; the solution keeps only a tile of
    // them); six tiles of scores and eight of rows; 64 KiB slack for the allocator and small
    // bookkeeping. Nothing is Nq x Nk, nor block x N. Measured: the solution peaks at 0.52 of
    // the bound (N = 2048), the query-outer variant at 0.68, a score tile of all queries at 1.37.
    const long acc = sizeof(float), Nq = p.Nq, Nk = p.Nk, d = p.d;
    const long bq = std::min<long>(p.block_q, Nq), bk = std::min<long>(p.block_k, Nk);
    const long outputs = (Nq + 2 * Nk) * d * long(sizeof(float));
    const long copies = (Nq * (d + 2) + 2 * Nk * d) * acc;
    const long tiles = 6 * bq * bk * acc + 8 * (bq + bk) * d * acc;
    const long slack = 64 * 1024;
    const long bound = outputs + copies + tiles + slack;
    const Case c{"attention_backward", "fp32", {Nq, d}, describe(p, grading::seed())};
    grading::expect(peak <= bound, c,
                    "peak heap during the call was " + std::to_string(peak) +
                        " bytes, which exceeds the allowed O(N*d + block_q*block_k) bound of " +
                        std::to_string(bound) + " bytes (outputs " + std::to_string(outputs) +
                        " + per-row accumulators " + std::to_string(copies) + " + tiles " +
                        std::to_string(tiles) + " + slack " + std::to_string(slack) +
                        "); for scale: an Nq x Nk score matrix is " +
                        std::to_string(Nq * Nk * acc) + " bytes, a block_k x Nq one " +
                        std::to_string(bk * Nq * acc));
    // The same bound, measured by the kernel: the lab process's peak resident memory, during
    // the call and from its start (resident_memory.hpp). It also holds the inputs and outputs as
    // the server decodes and encodes them (twice each, three times for the outputs), and a few
    // MiB of pages; a backstop for memory the heap meter cannot see (static arrays, memory
    // mapped directly, an operator new of the lab's own).
    const long inputs = long(sizeof(float)) * ((3 * Nq + 2 * Nk) * d + Nq);
    const long io = 2 * inputs + 3 * outputs;
    const long rss_bound = bound + io + (4 << 20);
    grading::expect_resident_memory(c, rss_before, rss_after, rss_bound,
                                    "the O(N*d + block_q*block_k) bound plus its inputs and "
                                    "outputs and 4 MiB");
  }
}

// --- Work: multiplications and exponentials counted by CountedFloat ---------------------------

namespace {

struct Counts {
  double multiplications, exponentials;
};

// Runs attention_backward<float, CountedFloat> on p, checks its gradients against the reference
// (so that the counts belong to a correct computation), and returns what it counted.
Counts counted_run(const Problem& p) {
  const LabInputs x = lab_inputs<float>(p, grading::seed(), "work");
  course::CountedFloat::multiplications() = 0;
  course::CountedFloat::exponentials() = 0;
  const Grads got = run_lab<float, course::CountedFloat>(x, p);
  const Counts n{double(course::CountedFloat::multiplications()),
                 double(course::CountedFloat::exponentials())};
  const Grads ref =
      reference::attention_backward<double>(x.Q, x.K, x.V, x.dO, scale_of(p), p.causal);
  compare_gradients<float>(got, ref, x, p, describe(p, grading::seed()) + ", CountedFloat");
  return n;
}

double tiles(int n, int block) { return std::ceil(double(n) / std::min(block, std::max(n, 1))); }

}  // namespace

TEST_CASE("work: one exponential per score, 5*Nq*Nk*d multiplications (counted)" *
          grading::points(2, kFp32)) {
  // Exponentials: P_ij = exp(S_ij - LSE_i) once per score; nothing else needs one. Allowed: at
  // most one more per row and key tile. Multiplications: S = Q K^T, dV += P^T dO, dP = dO V^T,
  // dQ += dS K and dK += dS^T Q are Nq Nk d each; the rest (dS = P (dP - D), the scale, D) is of
  // lower order.
  const std::vector<Problem> ps = {{256, 256, 16, 64, 64}, {200, 333, 32, 64, 48},
                                   {128, 100, 16, 32, 64}};
  for (const Problem& p : ps) {
    const Counts n = counted_run(p);
    const double Nq = p.Nq, Nk = p.Nk, d = p.d;
    const double Tr = tiles(p.Nq, p.block_q), Tc = tiles(p.Nk, p.block_k);
    const Case c{"attention_backward<float, CountedFloat>", "fp32", {p.Nq, p.d},
                 describe(p, grading::seed())};
    const double e_lower = Nq * Nk, e_upper = Nq * Nk + Nq * Tc;
    grading::expect(n.exponentials >= e_lower && n.exponentials <= e_upper, c,
                    fmt(n.exponentials) + " exponentials counted, outside [" + fmt(e_lower) + ", " +
                        fmt(e_upper) + "]: expected one per score, Nq Nk = " + fmt(Nq * Nk) + " (" +
                        (n.exponentials < e_lower
                             ? grading::uncounted_exponentials_note() + "; otherwise some probabilities were not computed"
                             : "too many: probabilities or row statistics computed more than once; "
                               "P_ij = exp(S_ij - LSE_i) needs the saved LSE only") +
                        ")");
    const double expected = 5 * Nq * Nk * d;
    const double m_lower = 0.99 * expected;
    const double m_upper = expected + 3 * Nq * Nk + 2 * (Nq * Tc + Nk * Tr) * d + 4 * (Nq + Nk) * d;
    grading::expect(n.multiplications >= m_lower && n.multiplications <= m_upper, c,
                    fmt(n.multiplications) + " multiplications counted, outside [" + fmt(m_lower) +
                        ", " + fmt(m_upper) + "]: expected 5 Nq Nk d = " + fmt(expected) +
                        " plus lower-order terms (" +
                        (n.multiplications < m_lower
                             ? "too few: some of S, dP or the gradient products were not computed"
                             : "too many: work beyond the five tile products") +
                        ")");
  }
}

TEST_CASE("work: causal skips tiles above the diagonal (about half the work)" *
          grading::points(3, kCausalFp64)) {
  // Exponentials (one per score computed) against two exact figures of the shape: the visible
  // (query, key) pairs, each of which needs its P, and the entries of the tiles on or below the
  // diagonal, which a tile-skipping code computes (and masks where needed).
  const std::vector<Problem> ps = {{512, 512, 16, 32, 32, true}, {256, 512, 16, 32, 32, true},
                                   {512, 256, 16, 64, 16, true}};
  // Multiplications too, against the work of those tiles (5 d per entry, as in "work: ..." above):
  // a code that guards each masked score's exponential (exp of -inf skipped) but computes every
  // tile has the exponentials of a skipping code and all of the products.
  for (const Problem& p : ps) {
    const Counts counted = counted_run(p);
    const double n = counted.exponentials;
    double visible = 0, tile_entries = 0;
    for (long i = 0; i < p.Nq; ++i) visible += std::clamp<long>(i + p.Nk - p.Nq + 1, 0, p.Nk);
    for (long q0 = 0; q0 < p.Nq; q0 += p.block_q) {
      const long rows = std::min<long>(p.block_q, p.Nq - q0);
      const long seen = std::clamp<long>(q0 + rows + p.Nk - p.Nq, 0, p.Nk);  // by the last row
      const double tile_keys = std::ceil(double(seen) / p.block_k) * p.block_k;  // whole tiles
      tile_entries += double(rows) * std::min<double>(p.Nk, tile_keys);
    }
    const double cells = double(p.Nq) * p.Nk;
    grading::expect(n >= visible && n <= tile_entries,
                    {"attention_backward<float, CountedFloat>", "fp32", {p.Nq, p.d},
                     describe(p, grading::seed())},
                    fmt(n) + " exponentials counted (" + fmt(n / cells) + " of Nq Nk), outside [" +
                        fmt(visible) + ", " + fmt(tile_entries) + "], the visible scores and the "
                        "entries of the tiles on or below the diagonal: " +
                        (n > tile_entries
                             ? "tiles above the diagonal must be skipped, not computed and masked"
                             : grading::uncounted_exponentials_note() +
                                   "; otherwise visible scores were skipped"));
    const double d = p.d, Tr = tiles(p.Nq, p.block_q), Tc = tiles(p.Nk, p.block_k);
    const double m_upper = 5 * tile_entries * d + 3 * tile_entries + 2 * (p.Nq * Tc + p.Nk * Tr) * d +
                           4 * (p.Nq + p.Nk) * d;
    grading::expect(counted.multiplications <= m_upper,
                    {"attention_backward<float, CountedFloat>", "fp32", {p.Nq, p.d},
                     describe(p, grading::seed())},
                    fmt(counted.multiplications) + " multiplications counted, over " + fmt(m_upper) +
                        ", the five products of the tiles on or below the diagonal (5 d per entry) "
                        "and lower-order terms: tiles above the diagonal must be skipped, not computed "
                        "and masked (guarding each masked score's exponential still computes its products)");
  }
}

// --- Bad input -----------------------------------------------------------------------------------

TEST_CASE("errors: bad input throws course::BadInput" * grading::points(1, kFp64)) {
  using course::BadInput;
  using M = course::Matrix<float>;
  using L = course::Vector<float>;
  auto backward = [](const M& Q, const M& K, const M& V, const M& O, const M& dO, const L& lse,
                     const BackwardOptions& o) {
    return course::lab7::attention_backward<float>(Q, K, V, O, dO, lse, o);
  };
  const M Q = M::Ones(4, 8), K = M::Ones(5, 8), V = M::Ones(5, 8), O = M::Ones(4, 8),
          dO = M::Ones(4, 8);
  const L lse = L::Ones(4);
  BackwardOptions ok;
  CHECK_THROWS_AS(backward(Q, M::Ones(5, 7), V, O, dO, lse, ok), BadInput);  // d differs
  CHECK_THROWS_AS(backward(Q, K, M::Ones(6, 8), O, dO, lse, ok), BadInput);  // Nk differs
  CHECK_THROWS_AS(backward(Q, K, V, M::Ones(3, 8), dO, lse, ok), BadInput);  // O is not [Nq, d]
  CHECK_THROWS_AS(backward(Q, K, V, O, M::Ones(4, 9), lse, ok), BadInput);   // dO is not [Nq, d]
  CHECK_THROWS_AS(backward(Q, K, V, O, dO, L::Ones(5), ok), BadInput);       // lse is not [Nq]
  CHECK_THROWS_AS(backward(M(4, 0), M(5, 0), M(5, 0), M(4, 0), M(4, 0), lse, ok),
                  BadInput);  // d = 0
  BackwardOptions bad_q = ok, bad_k = ok;
  bad_q.block_q = 0;
  bad_k.block_k = -3;
  CHECK_THROWS_AS(backward(Q, K, V, O, dO, lse, bad_q), BadInput);
  CHECK_THROWS_AS(backward(Q, K, V, O, dO, lse, bad_k), BadInput);
  const float inf = std::numeric_limits<float>::infinity();
  // NaN, +inf and -inf in each of Q, K, V, O and dO.
  for (float bad : {std::nanf(""), inf, -inf}) {
    M q = Q, k = K, v = V, o = O, dout = dO;
    q(2, 3) = k(4, 0) = v(0, 7) = o(3, 1) = dout(1, 5) = bad;
    CHECK_THROWS_AS(backward(q, K, V, O, dO, lse, ok), BadInput);
    CHECK_THROWS_AS(backward(Q, k, V, O, dO, lse, ok), BadInput);
    CHECK_THROWS_AS(backward(Q, K, v, O, dO, lse, ok), BadInput);
    CHECK_THROWS_AS(backward(Q, K, V, o, dO, lse, ok), BadInput);
    CHECK_THROWS_AS(backward(Q, K, V, O, dout, lse, ok), BadInput);
  }
  // NaN and +inf in lse are errors; -inf is the LSE of a row that sees no key.
  for (float bad : {std::nanf(""), inf}) {
    L l = lse;
    l(2) = bad;
    CHECK_THROWS_AS(backward(Q, K, V, O, dO, l, ok), BadInput);
  }
  L no_key = lse;
  no_key(0) = -inf;
  CHECK_NOTHROW(backward(Q, K, V, O, dO, no_key, ok));
  CHECK_NOTHROW(backward(Q, K, V, O, dO, lse, ok));
}

// --- Work: the causal rule measured by the kernel --------------------------------------------------

namespace {

// One problem of the timed calls: the lab's inputs in fp32, the fp64 gradients and the band of
// each (computed once, for every round that calls it).
struct TimedBackward {
  Problem p;
  LabInputs x;
  Grads ref;
  grading::Tolerance dq_band, dk_band, dv_band;
};

TimedBackward timed_backward(const Problem& p, const std::string& label) {
  TimedBackward t{p, lab_inputs<float>(p, grading::seed(), label), {}, {}, {}, {}};
  const LabInputs& x = t.x;
  t.ref = reference::attention_backward<double>(x.Q, x.K, x.V, x.dO, scale_of(p), p.causal);
  const Grads plain = reference::plain_attention_backward<float>(x.Q, x.K, x.V, x.O, x.dO, x.lse,
                                                                 scale_of(p), p.causal);
  const Sensitivity s = score_rounding_sensitivity(x, p);
  auto band = [&](const Md& r, const Md& plain_g, double sensitivity) {
    return grading::with_gradient_score_rounding(
        grading::band_against_plain(Quantity::gradient, "fp32", r, plain_g), "fp32", sensitivity, p.d);
  };
  t.dq_band = band(t.ref.dQ, plain.dQ, s.dQ);
  t.dk_band = band(t.ref.dK, plain.dK, s.dK);
  t.dv_band = band(t.ref.dV, plain.dV, s.dV);
  return t;
}

// The CPU time, in seconds, that the kernel charged to the lab process for one call of
// attention_backward<float> on t, all its threads; nullopt when a gradient is out of its band
// (the check has failed), so that the time belongs to a correct computation.
std::optional<double> timed_backward_call(const TimedBackward& t) {
  const double before = isolation::lab().cpu_seconds();
  const Grads got = run_lab<float>(t.x, t.p);
  const double after = isolation::lab().cpu_seconds();
  const std::string inputs = describe(t.p, grading::seed()) + ", timed";
  const grading::Shape shape{t.p.Nq, t.p.d}, key_shape{t.p.Nk, t.p.d};
  const bool ok =
      grading::expect_close_within({"attention_backward dQ", "fp32", shape, inputs}, got.dQ, t.ref.dQ, t.dq_band) &&
      grading::expect_close_within({"attention_backward dK", "fp32", key_shape, inputs}, got.dK, t.ref.dK, t.dk_band) &&
      grading::expect_close_within({"attention_backward dV", "fp32", key_shape, inputs}, got.dV, t.ref.dV, t.dv_band);
  if (!ok) return std::nullopt;
  return after - before;
}

}  // namespace

TEST_CASE("work: causal skips tiles above the diagonal (CPU time measured)" *
          grading::points(2, kCausalFp64)) {
  // The rule of the check above, measured by the kernel instead of CountedFloat
  // (grader/common/cpu_time_ratio.hpp): the CPU time of attention_backward<float>, the type the
  // lab really runs, with the causal mask against the same shape without it, four calls a side
  // in a round, each in a fresh lab process. At N = 512, d = 64 with tiles of 32 there are
  // T = 16 key tiles per query tile, so the tiles on or below the diagonal are 17/32 = 0.53 of
  // all: a code that skips the others takes about half the time, one that computes and masks
  // them (or skips them only when counted) about as long as without the mask.
  grading::skip_under_address_sanitizer();
  const Problem full{512, 512, 64, 32, 32};
  Problem masked = full;
  masked.causal = true;
  const double tiles = full.Nk / full.block_k;
  constexpr int kCalls = 4;
  std::vector<TimedBackward> masked_calls, full_calls;
  for (int i = 0; i < kCalls; ++i) {
    masked_calls.push_back(timed_backward(masked, "cpu time, causal " + std::to_string(i)));
    full_calls.push_back(timed_backward(full, "cpu time, not causal " + std::to_string(i)));
  }
  const auto ratio = grading::measure_cpu_time_ratio(
      kCalls, {"attention_backward", "fp32", {full.Nq, full.d}, describe(full, grading::seed())},
      [&] {
        // A fresh lab process, warmed by a small call (its start is not charged to the round).
        isolation::lab().restart();
        (void)run_lab<float>(lab_inputs<float>({8, 8, full.d, 8, 8}, grading::seed(), "warm up"),
                             {8, 8, full.d, 8, 8});
      },
      [&](bool causal, int i) { return timed_backward_call(causal ? masked_calls[i] : full_calls[i]); });
  if (ratio)
    grading::expect_causal_cpu_time(*ratio, {"attention_backward", "fp32", {masked.Nq, masked.d},
                                             describe(masked, grading::seed())},
                                    (tiles + 1) / (2 * tiles));
}

// --- Part 2: flash_attention_backward on the GPU -------------------------------------------------
//
// The same inputs, reference and bands as part 1, head by head: a [B, H, N, d] problem is B * H
// problems of lab_inputs<T> (each head drawn with its own label), sent to the lab process in the
// dtype's bits, run there by serve_gpu.cpp inside the GPU harness (NaN guard zones, NaN-poisoned
// outputs and workspace, a busy default stream, reads on the lab's stream), and compared head by
// head with compare_gradients<T>. fp32 and bf16 (the kernel's dtypes), d = 64 and 128.

namespace {

const char* kGpuFp32 = "gpu: fp32 matches the reference (d 64 and 128, N not a multiple of the tile)";

}  // namespace

TEST_CASE("gpu: fp32 matches the reference (d 64 and 128, N not a multiple of the tile)" * grading::points(3)) {
  for (const GpuProblem& g : kGpuShapes) check_gpu<float>(g, grading::seed());
}

TEST_CASE("gpu: bf16 within band (fp32 accumulation)" * grading::points(2, kGpuFp32)) {
  for (const GpuProblem& g : kGpuShapes) check_gpu<bf16>(g, grading::seed());
}

TEST_CASE("gpu: causal, Nq != Nk aligned bottom-right, rows with no key give dQ = 0" *
          grading::points(3, kGpuFp32)) {
  for (const GpuProblem& g : causal(kGpuShapes)) {
    check_gpu<float>(g, grading::seed());
    check_gpu<bf16>(g, grading::seed());
  }
  // Nq > Nk: the first Nq - Nk rows see no key (LSE = -inf), inside tiles that also hold rows
  // that do; Nq < Nk: the first K/V tiles are seen by every query.
  for (const GpuProblem& g : causal<GpuProblem>({{1, 2, 150, 40, 64}, {2, 1, 70, 260, 128}, {1, 1, 5, 3, 64}}))
    check_gpu<float>(g, grading::seed());
}

TEST_CASE("gpu: large scores and outliers (P from the saved LSE, no NaN)" * grading::points(1, kGpuFp32)) {
  for (bool c : {false, true}) {
    check_gpu<float>({1, 2, 200, 200, 64, c, Distribution::negative_rows}, grading::seed());
    check_gpu<float>({1, 2, 200, 200, 64, c, Distribution::large_scores}, grading::seed());
    check_gpu<bf16>({1, 2, 130, 130, 128, c, Distribution::outliers}, grading::seed());
    check_gpu<float>({1, 1, 100, 150, 64, c, Distribution::normal, 30.0}, grading::seed());
  }
}

TEST_CASE("gpu: long sequences, many K/V tiles adding into dQ (N = 1024)" * grading::points(2, kGpuFp32)) {
  check_gpu<float>({1, 2, 1024, 1024, 64, true}, grading::seed());
  check_gpu<bf16>({1, 1, 1024, 1024, 128, false}, grading::seed());
  check_gpu<bf16>({2, 1, 777, 1024, 64, true}, grading::seed() + 1);
}

TEST_CASE("gpu: deterministic dK and dV, and right, for several seeds (no race)" * grading::points(1, kGpuFp32)) {
  const std::uint64_t s = grading::seed() * 1000;
  for (std::uint64_t seed : {s, s + 1})
    check_gpu_deterministic<float>({2, 2, 700, 700, 64, true}, seed, Kernel::cuda_cores);
}

TEST_CASE("gpu: compute-sanitizer finds no race, barrier misuse or bad access" * grading::points(2, kGpuFp32)) {
  check_gpu_sanitized<float>(Kernel::cuda_cores);
}

TEST_CASE("gpu: bad input gets a clear error" * grading::points(1, kGpuFp32)) {
#if COURSE_LAB7_GPU
  gpu_grading::require_device();
  const std::uint64_t enough = std::uint64_t(1) << 20;
  CHECK_THROWS_AS(bad_gpu_call(32, DType::fp32, 64, false, enough), course::BadInput);   // d = 32
  CHECK_THROWS_AS(bad_gpu_call(64, DType::fp16, 64, false, enough), course::BadInput);   // fp16
  CHECK_THROWS_AS(bad_gpu_call(64, DType::fp32, 0, false, enough), course::BadInput);    // Nq = 0
  CHECK_THROWS_AS(bad_gpu_call(64, DType::fp32, 64, true, enough), course::BadInput);    // null Q
  CHECK_THROWS_AS(bad_gpu_call(64, DType::fp32, 64, false, 16), course::BadInput);       // workspace
  CHECK_NOTHROW(bad_gpu_call(64, DType::fp32, 64, false, enough));  // the same call, valid, runs
#else
  grading::skip("lab 7 part 2 (the GPU kernel) was not built: no CUDA compiler was found when the grader was configured");
#endif
}

// --- Part 3: the same function on tensor cores ----------------------------------------------------

namespace {
const char* kTc = "tc: bf16 and fp16 match the reference (d 64 and 128, N not a multiple of the tile)";

template <class T>
void check_tc(const GpuProblem& g, std::uint64_t seed) {
  check_gpu<T>(g, seed, Kernel::tensor_cores);
}
}  // namespace

TEST_CASE("tc: bf16 and fp16 match the reference (d 64 and 128, N not a multiple of the tile)" *
          grading::points(3)) {
  for (const GpuProblem& g : kGpuShapes) {
    check_tc<bf16>(g, grading::seed());
    check_tc<fp16>(g, grading::seed());
  }
}

TEST_CASE("tc: causal, Nq != Nk aligned bottom-right, rows with no key give dQ = 0" * grading::points(2, kTc)) {
  for (const GpuProblem& g : causal(kGpuShapes)) check_tc<bf16>(g, grading::seed());
  for (const GpuProblem& g : causal<GpuProblem>({{1, 2, 150, 40, 64}, {2, 1, 70, 260, 128}, {1, 1, 5, 3, 64}}))
    check_tc<fp16>(g, grading::seed());
}

TEST_CASE("tc: large scores and outliers (P from the saved LSE, no NaN)" * grading::points(1, kTc)) {
  for (bool c : {false, true}) {
    check_tc<bf16>({1, 2, 200, 200, 64, c, Distribution::negative_rows}, grading::seed());
    check_tc<fp16>({1, 2, 200, 200, 128, c, Distribution::large_scores}, grading::seed());
    check_tc<bf16>({1, 2, 130, 130, 128, c, Distribution::outliers}, grading::seed());
  }
}

// Many query tiles through the two shared-memory stages (a stage read while it is refilled shows
// here), and many K/V tiles adding into the same dQ rows.
TEST_CASE("tc: long sequences, every query tile through the pipeline (N = 1024 to 2000)" * grading::points(2, kTc)) {
  check_tc<bf16>({1, 2, 1024, 1024, 128, true}, grading::seed());
  check_tc<fp16>({1, 1, 2000, 1100, 64, false}, grading::seed());
  check_tc<bf16>({2, 1, 777, 1024, 64, true}, grading::seed() + 1);
}

TEST_CASE("tc: deterministic dK and dV, and right, for several seeds (no race)" * grading::points(1, kTc)) {
  const std::uint64_t s = grading::seed() * 1000;
  for (std::uint64_t seed : {s, s + 1})
    check_gpu_deterministic<bf16>({2, 2, 700, 700, 128, true}, seed, Kernel::tensor_cores);
}

TEST_CASE("tc: compute-sanitizer finds no race, barrier misuse or bad access" * grading::points(2, kTc)) {
  check_gpu_sanitized<bf16>(Kernel::tensor_cores);
}

TEST_CASE("tc: bad input gets a clear error" * grading::points(1, kTc)) {
#if COURSE_LAB7_GPU
  gpu_grading::require_device();
  const std::uint64_t enough = std::uint64_t(1) << 20;
  const Kernel tc = Kernel::tensor_cores;
  CHECK_THROWS_AS(bad_gpu_call(64, DType::fp32, 64, false, enough, tc), course::BadInput);  // fp32
  CHECK_THROWS_AS(bad_gpu_call(96, DType::bf16, 64, false, enough, tc), course::BadInput);  // d = 96
  CHECK_THROWS_AS(bad_gpu_call(64, DType::fp16, 64, false, 16, tc), course::BadInput);      // workspace
  CHECK_NOTHROW(bad_gpu_call(64, DType::fp16, 64, false, enough, tc));  // the same call, valid, runs
#else
  grading::skip("lab 7 part 3 (the tensor-core kernel) was not built: no CUDA compiler was found when the grader was configured");
#endif
}
