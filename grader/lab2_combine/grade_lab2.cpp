// Lab 2 grader: block statistics, the exact combine and the streaming softmax.
//
// The combine checks feed it statistics computed here, in fp64, from the reference, so that a
// bug in the student's block_stats cannot make combine fail (or pass) for the wrong reason.
//
// A softmax that ignores the block size gives the same numbers as a streaming one; the last
// check tells them apart by counting exponentials (softmax_streaming<float, CountedFloat>): each
// block folded in with combine costs at least one rescale.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "compare.hpp"
#include "course/lab2_combine.hpp"
#include "reference/data.hpp"
#include "reference/reference.hpp"

using course::bf16;
using course::fp16;
using course::lab2::BlockStats;
using grading::Case;
using grading::Md;
using grading::Quantity;
using reference::Distribution;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

Md inputs(Eigen::Index rows, Eigen::Index cols, Distribution dist, const std::string& label) {
  reference::Rng rng(grading::seed(), label);
  return reference::random_matrix(rows, cols, dist, rng);
}

// Exact statistics of x[from, to) in fp64, computed by the reference (not the student).
BlockStats<double> exact_stats(const Md& row, Eigen::Index from, Eigen::Index to) {
  if (from == to) return {-kInf, 0.0};
  const Md part = row.block(0, from, 1, to - from);
  const double m = part.maxCoeff();
  if (m == -kInf) return {-kInf, 0.0};
  return {m, (part.array() - m).exp().sum()};
}

// combine(empty, a) must give a back: m exactly, l up to the rounding of a combine that works in
// the log domain, exp((m_a + log l_a) - m), whose argument carries about one ulp of
// |m_a| + |log l_a|; exp turns that into the same relative error of l. Allowed: 4 such ulps.
// (The solution's linear form a.l * exp(0) + 0 is exact.)
bool identity_l_close(double got_l, BlockStats<double> a) {
  const double ulps = 4 * 0x1p-52 * (2 + std::abs(a.m) + std::abs(std::log(a.l)));
  return std::abs(got_l - a.l) <= ulps * a.l;
}

double lse_of_exact(BlockStats<double> s) { return s.m == -kInf ? -kInf : s.m + std::log(s.l); }

std::string stats_string(double m, double l) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "(m = %.17g, l = %.17g)", m, l);
  return buf;
}

// The LSE of one row of n entries, from statistics folded together by the student's combine: one
// value compared (shape [1]), the row's length said with the inputs.
Case lse_case(const std::string& what, const std::string& dtype, Eigen::Index n, const std::string& inputs) {
  return {what, dtype, {1}, "the LSE of a row of " + std::to_string(n) + " entries, " + inputs};
}

bool expect_lse(const Case& c, double got, double ref, double plain) {
  return grading::expect_close(c, Quantity::lse, Md::Constant(1, 1, got), Md::Constant(1, 1, ref),
                               Md::Constant(1, 1, plain));
}

// Splits [0, n) into random blocks and combines them along a random binary tree.
template <class Acc>
BlockStats<Acc> combine_random_tree(const Md& row, Eigen::Index from, Eigen::Index to,
                                    reference::Rng& rng) {
  if (to - from <= 1 || rng.uniform() < 0.15) {
    const BlockStats<double> s = exact_stats(row, from, to);
    return {Acc(s.m), Acc(s.l)};
  }
  const Eigen::Index mid = from + 1 + Eigen::Index(rng.uniform_int(0, int(to - from - 2)));
  const BlockStats<Acc> left = combine_random_tree<Acc>(row, from, mid, rng);
  const BlockStats<Acc> right = combine_random_tree<Acc>(row, mid, to, rng);
  return course::lab2::combine(left, right);
}

const std::vector<int> kBlockSizes = {1, 3, 7, 64};

// softmax_streaming<T> against the reference for every block size, including ones that do not
// divide the row length, N itself and one larger than N.
template <class T>
void streaming_matches_reference(Distribution dist, Eigen::Index rows, Eigen::Index cols) {
  const Md x = inputs(rows, cols, dist, std::string("streaming/") + course::dtype_name<T>());
  const Md xr = reference::round_to<T>(x);
  std::vector<int> blocks = kBlockSizes;
  blocks.push_back(int(cols));
  blocks.push_back(int(cols) + 5);
  for (int block : blocks) {
    const auto out = course::lab2::softmax_streaming<T>(grading::to_storage<T>(x), block);
    const std::string desc = std::string(reference::to_string(dist)) + " inputs, block " + std::to_string(block);
    grading::expect_close({"softmax_streaming y", course::dtype_name<T>(), {long(rows), long(cols)}, desc},
                          Quantity::probability, grading::to_double(out.y),
                          reference::softmax_rows<double>(xr), reference::plain_softmax_rows<T>(xr),
                          reference::plain_softmax_rows<float>(xr));
    grading::expect_close({"softmax_streaming lse", course::dtype_name<T>(), {long(rows)}, desc},
                          Quantity::lse, grading::to_double(out.lse),
                          reference::logsumexp_rows<double>(xr), reference::plain_logsumexp_rows<T>(xr));
  }
}

template <class T>
void block_stats_matches(const std::string& label) {
  for (Distribution dist : {Distribution::normal, Distribution::outliers, Distribution::large_logits,
                            Distribution::offset_logits}) {
    // offset_logits: odd rows lie near -1e4, so a max started at 0 instead of -inf is wrong.
    const Md x = inputs(4, 113, dist, label + course::dtype_name<T>());
    const Md xr = reference::round_to<T>(x);
    const course::Matrix<T> xs = grading::to_storage<T>(x);
    for (Eigen::Index r = 0; r < x.rows(); ++r) {
      const auto got = course::lab2::block_stats<T>(&xs(r, 0), int(x.cols()));
      const BlockStats<double> ref = exact_stats(xr.row(r), 0, x.cols());
      const Case c{"block_stats", course::dtype_name<T>(), {1, long(x.cols())},
                   std::string(reference::to_string(dist)) + " inputs, row " + std::to_string(r)};
      grading::expect(double(got.m) == ref.m, c,
                      "m must be the block's largest entry exactly: got " +
                          stats_string(double(got.m), double(got.l)) + ", expected " +
                          stats_string(ref.m, ref.l));
      const Md plain = reference::plain_logsumexp_rows<T>(xr.row(r));
      expect_lse(c, double(got.m) + std::log(double(got.l)), lse_of_exact(ref), plain(0));
    }
  }
}

const char* kStreaming = "softmax_streaming: matches reference for block sizes that do and do not divide N, in every dtype";

}  // namespace

TEST_CASE("empty_stats is the identity of combine" * grading::points(1)) {
  const auto e64 = course::lab2::empty_stats<double>();
  const Case c{"empty_stats", "fp64", {1}, "the identity element"};
  grading::expect(e64.m == -kInf && e64.l == 0.0, c,
                  "empty_stats() must be (-inf, 0): the max of no scores and the sum of no terms; got " +
                      stats_string(e64.m, e64.l));
  const auto e32 = course::lab2::empty_stats<float>();
  grading::expect(e32.m == -std::numeric_limits<float>::infinity() && e32.l == 0.0f,
                  {"empty_stats", "fp32", {1}, "the identity element"}, "empty_stats<float>() must be (-inf, 0)");
  const Md x = inputs(1, 50, Distribution::normal, "identity");
  for (auto [from, to] : {std::pair{0, 50}, std::pair{10, 11}, std::pair{3, 40}}) {
    const BlockStats<double> a = exact_stats(x, from, to);
    for (bool empty_first : {true, false}) {
      const auto got = empty_first ? course::lab2::combine(e64, a) : course::lab2::combine(a, e64);
      grading::expect(got.m == a.m && identity_l_close(got.l, a), c,
                      std::string("empty_stats() is not the identity: combine(") +
                          (empty_first ? "empty, a" : "a, empty") + ") gave " + stats_string(got.m, got.l) +
                          " for a = " + stats_string(a.m, a.l));
    }
  }
}

TEST_CASE("block_stats: matches fp64 in every dtype" * grading::points(2)) {
  block_stats_matches<double>("block_stats/");
  block_stats_matches<float>("block_stats/");
  block_stats_matches<bf16>("block_stats/");
  block_stats_matches<fp16>("block_stats/");
}

TEST_CASE("block_stats: an empty block (n = 0) is empty_stats" * grading::points(1)) {
  // The block [x, x + 0) of a real row. The proxy sends its n = 0 entries, and the lab process
  // receives it as a pointer to a guard page: code that starts from m = x[0] crashes there.
  const Md row = Md::Constant(1, 4, 5.0);
  const course::Matrix<float> rowf = grading::to_storage<float>(row);
  const auto d = course::lab2::block_stats<double>(row.data(), 0);
  const auto f = course::lab2::block_stats<float>(rowf.data(), 0);
  const Case c{"block_stats", "fp64", {0}, "an empty block (n = 0)"};
  grading::expect(d.m == -kInf && d.l == 0.0, c,
                  "block_stats(x, 0) must be the empty block (-inf, 0), got " + stats_string(d.m, d.l));
  grading::expect(f.m == -std::numeric_limits<float>::infinity() && f.l == 0.0f,
                  {"block_stats", "fp32", {0}, "an empty block (n = 0)"},
                  "block_stats(x, 0) must be the empty block (-inf, 0), got " +
                      stats_string(double(f.m), double(f.l)));
}

TEST_CASE("combine: exact in fp64 against one-shot LSE" * grading::points(2)) {
  for (Distribution dist : {Distribution::normal, Distribution::outliers, Distribution::large_logits}) {
    const Md x = inputs(1, 1000, dist, "combine/exact");
    const double ref = reference::logsumexp_rows<double>(x)(0);
    for (Eigen::Index split : {Eigen::Index(1), Eigen::Index(500), Eigen::Index(999)}) {
      const auto got = course::lab2::combine(exact_stats(x, 0, split), exact_stats(x, split, 1000));
      const BlockStats<double> whole = exact_stats(x, 0, 1000);
      const Case c = lse_case("combine", "fp64", 1000,
                              std::string(reference::to_string(dist)) + " inputs, split at " + std::to_string(split));
      grading::expect(got.m == whole.m, c, "combined m must be max(m_a, m_b) exactly: got " +
                                               stats_string(got.m, got.l) + ", expected " +
                                               stats_string(whole.m, whole.l));
      expect_lse(c, lse_of_exact(got), ref, ref);
    }
  }
}

TEST_CASE("combine: commutative" * grading::points(1)) {
  const Md x = inputs(1, 200, Distribution::outliers, "combine/commutative");
  for (Eigen::Index split : {Eigen::Index(7), Eigen::Index(100), Eigen::Index(193)}) {
    const auto a = exact_stats(x, 0, split), b = exact_stats(x, split, 200);
    const auto ab = course::lab2::combine(a, b), ba = course::lab2::combine(b, a);
    const bool same = ab.m == ba.m && std::abs(ab.l - ba.l) <= 4e-16 * std::abs(ab.l);
    grading::expect(same, lse_case("combine", "fp64", 200, "split at " + std::to_string(split)),
                    "not commutative: combine(a, b) = " + stats_string(ab.m, ab.l) +
                        " but combine(b, a) = " + stats_string(ba.m, ba.l));
  }
}

TEST_CASE("combine: associative over random split trees" * grading::points(2)) {
  for (Eigen::Index n : {Eigen::Index(2), Eigen::Index(113), Eigen::Index(1000)}) {
    const Md x = inputs(1, n, Distribution::outliers, "combine/trees/" + std::to_string(n));
    const double ref = reference::logsumexp_rows<double>(x)(0);
    const double plain32 = reference::plain_logsumexp_rows<float>(x)(0);
    reference::Rng rng(grading::seed(), "trees/" + std::to_string(n));
    for (int tree = 0; tree < 20; ++tree) {
      const std::string desc = "random split tree " + std::to_string(tree);
      expect_lse(lse_case("combine", "fp64", n, desc),
                 lse_of_exact(combine_random_tree<double>(x, 0, n, rng)), ref, ref);
      const auto s32 = combine_random_tree<float>(x, 0, n, rng);
      expect_lse(lse_case("combine", "fp32", n, desc), double(s32.m) + std::log(double(s32.l)), ref, plain32);
    }
  }
}

TEST_CASE("combine: two empty blocks give the empty block, no NaN" * grading::points(2)) {
  const auto e = course::lab2::empty_stats<double>();
  const BlockStats<double> empty{-kInf, 0.0};
  const auto got = course::lab2::combine(empty, empty);
  const Case c{"combine", "fp64", {0}, "two empty blocks"};
  grading::expect(!std::isnan(got.m) && !std::isnan(got.l), c,
                  "combining two empty blocks made NaN: " + stats_string(got.m, got.l) +
                      " (-inf - (-inf) is NaN: guard the case where both maxima are -inf)");
  grading::expect(got.m == -kInf && got.l == 0.0, c,
                  "combining two empty blocks must give the empty block (-inf, 0), got " + stats_string(got.m, got.l));
  const auto f = course::lab2::combine(course::lab2::empty_stats<float>(), course::lab2::empty_stats<float>());
  grading::expect(!std::isnan(f.m) && !std::isnan(f.l), {"combine", "fp32", {0}, "two empty blocks"},
                  "combining two empty blocks made NaN in fp32");
  (void)e;
}

TEST_CASE("combine: with one empty block returns the other" * grading::points(1)) {
  // The empty side here comes from the student's own block_stats of a fully masked block.
  const Md masked = Md::Constant(1, 9, -kInf);
  const auto from_block = course::lab2::block_stats<double>(masked.data(), 9);
  const Case c{"block_stats + combine", "fp64", {1, 9}, "a fully masked block"};
  grading::expect(from_block.m == -kInf && from_block.l == 0.0, c,
                  "block_stats of a fully masked block must be the empty block (-inf, 0), got " +
                      stats_string(from_block.m, from_block.l));
  const Md x = inputs(1, 30, Distribution::normal, "combine/one-empty");
  const auto a = exact_stats(x, 0, 30);
  const auto got = course::lab2::combine(from_block, a);
  grading::expect(got.m == a.m && identity_l_close(got.l, a), c,
                  "combine(empty, a) gave " + stats_string(got.m, got.l) + ", expected " + stats_string(a.m, a.l));
}

TEST_CASE("lse_of: matches, -inf for empty" * grading::points(1)) {
  const Md x = inputs(1, 64, Distribution::large_logits, "lse_of");
  const auto s = exact_stats(x, 0, 64);
  const double ref = reference::logsumexp_rows<double>(x)(0);
  expect_lse(lse_case("lse_of", "fp64", 64, "large_logits inputs"), course::lab2::lse_of(s), ref, ref);
  const double empty = course::lab2::lse_of(BlockStats<double>{-kInf, 0.0});
  grading::expect(empty == -kInf, lse_case("lse_of", "fp64", 0, "the empty block"),
                  "lse_of(empty) must be -inf, got " + std::to_string(empty));
}

TEST_CASE("softmax_streaming: matches reference for block sizes that do and do not divide N, in every dtype" *
          grading::points(4)) {
  streaming_matches_reference<double>(Distribution::normal, 3, 113);
  streaming_matches_reference<double>(Distribution::outliers, 4, 1000);
  streaming_matches_reference<float>(Distribution::normal, 3, 113);
  streaming_matches_reference<float>(Distribution::outliers, 4, 1000);
  streaming_matches_reference<bf16>(Distribution::normal, 3, 113);
  streaming_matches_reference<bf16>(Distribution::outliers, 4, 1000);
  streaming_matches_reference<fp16>(Distribution::normal, 3, 113);
}

TEST_CASE("softmax_streaming: fully masked rows and all -inf blocks" * grading::points(2)) {
  streaming_matches_reference<double>(Distribution::masked, 5, 113);
  streaming_matches_reference<float>(Distribution::masked, 5, 113);
  // A row whose first blocks are entirely masked, then visible: the running stats stay empty
  // for a while and must not turn into NaN before the first finite score arrives.
  Md x = inputs(2, 40, Distribution::normal, "streaming/late");
  x.block(0, 0, 2, 25).setConstant(-kInf);
  for (int block : {1, 4, 8}) {
    const auto out = course::lab2::softmax_streaming<double>(x, block);
    grading::expect_close({"softmax_streaming y", "fp64", {2, 40}, "first 25 columns masked, block " + std::to_string(block)},
                          Quantity::probability, out.y, reference::softmax_rows<double>(x),
                          reference::softmax_rows<double>(x));
  }
}

TEST_CASE("softmax_streaming: rejects block < 1" * grading::points(1, kStreaming)) {
  const course::Matrix<float> x = course::Matrix<float>::Ones(2, 3);
  CHECK_THROWS_AS(course::lab2::softmax_streaming<float>(x, 0), course::BadInput);
  CHECK_THROWS_AS(course::lab2::softmax_streaming<float>(x, -4), course::BadInput);
}

TEST_CASE("softmax_streaming: large logits" * grading::points(2)) {
  streaming_matches_reference<double>(Distribution::large_logits, 3, 113);
  streaming_matches_reference<float>(Distribution::large_logits, 3, 113);
  streaming_matches_reference<bf16>(Distribution::large_logits, 3, 113);
}

TEST_CASE("softmax_streaming: rows of length 1, 2, 3, 113" * grading::points(1)) {
  for (Eigen::Index n : {1, 2, 3, 113}) streaming_matches_reference<float>(Distribution::outliers, 2, n);
}

namespace {

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

// Runs softmax_streaming<float, CountedFloat> on x, checks its y against the reference (so the
// count belongs to a correct computation), and returns the exponentials it counted.
double counted_exponentials(const Md& x, int block) {
  std::uint64_t& counter = course::CountedFloat::exponentials();
  counter = 0;
  const auto out = course::lab2::softmax_streaming<float, course::CountedFloat>(grading::to_storage<float>(x), block);
  const double n = double(counter);
  const Md xr = reference::round_to<float>(x);
  grading::expect_close({"softmax_streaming<float, CountedFloat> y", "fp32", {long(x.rows()), long(x.cols())},
                         "normal inputs, block " + std::to_string(block)},
                        Quantity::probability, grading::to_double(out.y), reference::softmax_rows<double>(xr),
                        reference::plain_softmax_rows<float>(xr));
  return n;
}

}  // namespace

TEST_CASE("softmax_streaming: folds one block at a time (exponentials counted)" * grading::points(2, kStreaming)) {
  // Per row of n scores in blocks of B: block_stats costs one exponential per score, each of
  // the ceil(n / B) combines rescales the running statistics (1 or 2 exponentials: the solution
  // computes exp(m_a - m) and exp(m_b - m)), and pass 2 one per score: about 2n + 2 ceil(n / B).
  // A softmax that takes the row at once costs the same for every B. Measured against B = n
  // (one block per row): every extra block must cost at least one more exponential, which holds
  // for any combine (linear or log domain, one or two exponentials) and any exact block_stats.
  const Eigen::Index rows = 4, n = 113;
  const Md x = inputs(rows, n, Distribution::normal, "streaming/counted");
  const double one_block = counted_exponentials(x, int(n));
  for (int block : {1, 8, 30}) {
    const double blocks = std::ceil(double(n) / block);
    const double got = counted_exponentials(x, block);
    const double lower = one_block + double(rows) * (blocks - 1);
    grading::expect(got >= lower,
                    {"softmax_streaming<float, CountedFloat>", "fp32", {long(rows), long(n)},
                     "normal inputs, block " + std::to_string(block)},
                    fmt(got) + " exponentials counted with block " + std::to_string(block) + " (" +
                        fmt(blocks) + " blocks per row) and " + fmt(one_block) + " with block = n = " +
                        std::to_string(n) + " (one block per row); expected at least " + fmt(lower) +
                        ", one more per extra block and row (each combine rescales the running "
                        "statistics; the solution's 2n + 2 ceil(n / block) per row gives " +
                        fmt(double(rows) * (2 * n + 2 * blocks)) + "): block is not honoured, "
                        "pass 1 must fold block_stats of each block of `block` columns with combine");
  }
}
