// The precision report of lab 3 (`./course report`): how far the lab 3 solution (blockwise,
// streaming attention, FA1 Algorithm 1) is from the fp64 reference, in every storage type, and
// why. It writes CSVs that grader/report/plot_report.py turns into report.md and PNGs.
//
//   precision_report [--out DIR] [--quick] [--seed S] [--jobs J]   (default out: build/report)
//
// Built twice from this file: precision_report measures solutions/lab3_attention, and
// precision_report_labs (COURSE_REPORT_LABS=1, `./course report --labs`) measures the student's
// labs/lab3_attention with the same studies.
//
// For every configuration (H heads of [N, d], block size, logit scale, causal or not) and every
// storage type T in {fp64, fp32, bf16, fp16} it measures, with the course's one error-statistics
// helper (grader/common/error_stats.hpp):
//
//   solution_vs_ref            lab 3 solution in T vs the fp64 reference on the same T-rounded
//                              inputs: the error of the algorithm and of storing O in T
//   plain_vs_ref               reference::plain_attention<T> (one-shot, S, P and O rounded to T)
//                              vs the same fp64 reference: the yardstick of the tolerance bands
//   solution_vs_plain          blockwise vs one-shot, both in T: the comparison a quick
//                              script makes when it has no higher-precision reference
//   every_op_vs_ref            (bf16, fp16 only; N <= 1024) one-shot attention computed in T
//                              arithmetic, every product, sum, max, exp and division rounded
//                              to T, sums left to right: what a script gets when it casts
//                              everything to bf16 and computes with it
//   solution_vs_ref_unrounded  lab 3 solution vs the fp64 reference on the unrounded fp64
//                              inputs: everything, input rounding included
//   plain_vs_ref_unrounded     the same for the plain implementation
//   input_rounding_only        fp64 reference on T-rounded inputs vs on unrounded inputs
//   output_rounding_only       the fp64 reference's O rounded once to T vs itself: what even a
//                              perfect algorithm must lose by storing O in T
//
// For fp64 the solution_vs_ref row *is* "blockwise fp64 vs one-shot fp64".
// Inputs are N(0, 1) from reference::Rng (seeded, per head and shape); the logit scale
// multiplies Q (before rounding), so scores have standard deviation ~ logit_scale. The
// fa3_outliers study draws Q, K, V close to the FlashAttention-3 paper's error study (Shah et
// al. 2024, section 4.3, Table 3): N(0, 1), with 0.1% of the entries replaced by N(0, 10^2)
// draws. The paper *adds* an N(0, 10^2) term to 0.1% of the entries (N(0, 1) + N(0, 100) *
// Bernoulli(0.001)), so its outliers have variance 101 instead of 100: the same outliers to
// within half a percent of their spread. plot_report.py compares the fp16 RMSE with the paper's
// Table 3 in two columns, against the reference on the same rounded inputs and on the
// unrounded ones, and says in which the order of magnitude agrees (fa3_agreement, which
// decides from the figures of the run). On this file's inputs, full and --quick, that is the
// unrounded-input column only: against the rounded inputs the blockwise error is about the one
// rounding of O to fp16, several times below the paper's figure.
//
// Every row carries RMSE (computed here: error_stats.hpp has max, p50, p99 but no RMSE) and
// the grader's tolerance band for that dtype and quantity (grader/common/tolerances.cpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

// The graders' numerics (error statistics, tolerance bands) without their doctest harness.
#include "course/lab3_attention.hpp"
#include "error_stats.hpp"
#include "tolerances.hpp"
#include "reference/data.hpp"
#include "reference/reference.hpp"

#ifndef COURSE_REPORT_LABS
#define COURSE_REPORT_LABS 0
#endif

namespace {

constexpr bool kLabs = COURSE_REPORT_LABS != 0;
constexpr const char* kWhat = kLabs ? "your lab 3 (labs/lab3_attention)"
                                    : "the lab 3 solution (solutions/lab3_attention)";

using grading::ErrorStats;
using Md = Eigen::MatrixXd;

struct Config {
  int H = 2, N = 1024, d = 64, block = 64;
  double logit_scale = 1.0;
  bool causal = false;
  bool fa3_outliers = false;  // inputs close to FA3 section 4.3: 0.1% of entries replaced by
                              // N(0, 10^2) draws (the paper adds such a term to them)
  auto key() const { return std::tuple(H, N, d, block, logit_scale, causal, fa3_outliers); }
};

// One measured figure set: a comparison of one quantity (O or LSE) in one storage type.
struct Row {
  std::string dtype, arithmetic, comparison, quantity;
  ErrorStats stats;
  double ref_max_abs = 0;  // max |reference| over finite entries (the scale of the quantity)
  double rmse = 0;         // sqrt(mean |got - ref|^2) over entries where both are finite
  double band = 0;         // the grader's tolerance band for this dtype and quantity
};

// Histogram of log10 |error| of O (the error distribution), kept for the main study.
constexpr double kHistLo = -18.0, kHistHi = 1.0, kHistStep = 0.1;
constexpr int kHistBins = 190;  // (kHistHi - kHistLo) / kHistStep
struct Histogram {
  std::string dtype, arithmetic, comparison;
  long zeros = 0, below = 0, above = 0;
  std::vector<long> counts = std::vector<long>(kHistBins, 0);
};

struct ConfigResult {
  std::vector<Row> rows;
  std::vector<Histogram> hists;
};

const char* arithmetic_of(const std::string& dtype) {
  if (dtype == "fp64") return "fp64 storage / fp64 arithmetic";
  if (dtype == "fp32") return "fp32 storage / fp32 arithmetic";
  if (dtype == "bf16") return "bf16 storage / fp32 accumulate";
  return "fp16 storage / fp32 accumulate";
}

const char* describe(const std::string& comparison) {
  static const std::map<std::string, const char*> text = {
      {"solution_vs_ref", "lab 3 solution (blockwise) vs fp64 reference on the same rounded inputs"},
      {"plain_vs_ref", "plain one-shot attention in the same dtype (S, P, O rounded) vs fp64 reference on the same rounded inputs"},
      {"solution_vs_plain", "lab 3 solution (blockwise) vs plain one-shot attention, both in the same dtype"},
      {"every_op_vs_ref", "one-shot attention with every operation rounded to the dtype (no fp32 anywhere) vs fp64 reference on the same rounded inputs"},
      {"solution_vs_ref_unrounded", "lab 3 solution vs fp64 reference on the unrounded fp64 inputs"},
      {"plain_vs_ref_unrounded", "plain one-shot attention vs fp64 reference on the unrounded fp64 inputs"},
      {"input_rounding_only", "fp64 reference on rounded inputs vs fp64 reference on unrounded inputs"},
      {"output_rounding_only", "fp64 reference O rounded once to the storage dtype vs itself"},
  };
  auto it = text.find(comparison);
  return it == text.end() ? "" : it->second;
}

// Per-head results of one storage type, flattened row-major so that heads concatenate.
struct HeadData {
  std::vector<double> sol_O, sol_lse, plain_O, plain_lse, ref_O, ref_lse, refu_O, refu_lse,
      ref_O_stored, every_O, every_lse;
};

// Largest N for which every_op_vs_ref is measured: it runs scalar T arithmetic (~N^2 d
// roundings per head), which at N = 4096 would double the report's run time.
constexpr int kEveryOpMaxN = 1024;

// One-shot attention in T arithmetic: every operation's result rounded to T (Eigen's bf16 and
// half compute each operation in float and round), sums accumulated left to right in T.
template <class T>
reference::Attention<double> every_op_attention(const Md& Q, const Md& K, const Md& V,
                                                double scale, bool causal) {
  const Eigen::Index Nq = Q.rows(), Nk = K.rows(), d = Q.cols();
  const course::Matrix<T> q = Q.cast<T>(), k = K.cast<T>(), v = V.cast<T>();
  const T sc = T(scale);
  reference::Attention<double> out;
  out.O = Md::Zero(Nq, d);
  out.lse = Eigen::VectorXd::Constant(Nq, -std::numeric_limits<double>::infinity());
  std::vector<T> s(Nk), acc(d);
  for (Eigen::Index i = 0; i < Nq; ++i) {
    Eigen::Index seen = 0;
    for (Eigen::Index j = 0; j < Nk && (!causal || reference::causal_sees(i, j, Nq, Nk)); ++j) {
      T dot = T(0);
      for (Eigen::Index c = 0; c < d; ++c) dot = T(dot + T(q(i, c) * k(j, c)));
      s[j] = T(dot * sc);
      seen = j + 1;
    }
    if (seen == 0) continue;
    T m = s[0];
    for (Eigen::Index j = 1; j < seen; ++j) m = s[j] > m ? s[j] : m;
    T l = T(0);
    std::fill(acc.begin(), acc.end(), T(0));
    for (Eigen::Index j = 0; j < seen; ++j) {
      const T p = T(std::exp(float(T(s[j] - m))));
      l = T(l + p);
      for (Eigen::Index c = 0; c < d; ++c) acc[c] = T(acc[c] + T(p * v(j, c)));
    }
    for (Eigen::Index c = 0; c < d; ++c) out.O(i, c) = double(T(acc[c] / l));
    out.lse(i) = double(T(m + T(std::log(float(l)))));
  }
  return out;
}

void append_matrix(std::vector<double>& out, const Md& m) {
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index c = 0; c < m.cols(); ++c) out.push_back(m(i, c));
}
template <class V>
void append_vector(std::vector<double>& out, const V& v) {
  for (Eigen::Index i = 0; i < v.size(); ++i) out.push_back(double(v(i)));
}

struct HeadInputs {
  Md Q, K, V;                    // unrounded fp64
  reference::Attention<double> ref_unrounded;
};

// N(0, 1) entries, 0.1% of them replaced by N(0, 10^2) draws. FA3 section 4.3 adds an
// N(0, 10^2) term to 0.1% of the entries instead (variance 101, not 100, for those entries).
Md fa3_matrix(Eigen::Index rows, Eigen::Index cols, reference::Rng& rng) {
  Md x(rows, cols);
  for (Eigen::Index r = 0; r < rows; ++r)
    for (Eigen::Index c = 0; c < cols; ++c) {
      const double v = rng.normal();
      x(r, c) = rng.uniform() < 1e-3 ? 10.0 * rng.normal() : v;
    }
  return x;
}

HeadInputs make_inputs(const Config& c, int head, std::uint64_t seed) {
  // The label names the shape and head only: every study that uses the same shape sees the
  // same numbers, and the logit scale multiplies the same Q.
  const std::string label = std::string(c.fa3_outliers ? "precision_report fa3 " : "precision_report ") +
                            "N=" + std::to_string(c.N) + " d=" + std::to_string(c.d) +
                            " head=" + std::to_string(head);
  reference::Rng rq(seed, label + " Q"), rk(seed, label + " K"), rv(seed, label + " V");
  HeadInputs in;
  if (c.fa3_outliers) {
    in.Q = fa3_matrix(c.N, c.d, rq) * c.logit_scale;
    in.K = fa3_matrix(c.N, c.d, rk);
    in.V = fa3_matrix(c.N, c.d, rv);
    return in;
  }
  in.Q = reference::random_matrix(c.N, c.d, reference::Distribution::normal, rq) * c.logit_scale;
  in.K = reference::random_matrix(c.N, c.d, reference::Distribution::normal, rk);
  in.V = reference::random_matrix(c.N, c.d, reference::Distribution::normal, rv);
  return in;
}

template <class T>
void measure_head(const Config& c, const HeadInputs& in, HeadData& out) {
  const double scale = course::default_softmax_scale(c.d);
  const Md Qr = reference::round_to<T>(in.Q), Kr = reference::round_to<T>(in.K),
           Vr = reference::round_to<T>(in.V);
  reference::Attention<double> ref;
  if constexpr (std::is_same_v<T, double>) {
    ref = in.ref_unrounded;
  } else {
    ref = reference::attention<double>(Qr, Kr, Vr, scale, c.causal);
  }
  const auto plain = reference::plain_attention<T>(Qr, Kr, Vr, scale, c.causal);

  course::lab3::AttentionOptions opt;
  opt.block_q = c.block;
  opt.block_k = c.block;
  opt.causal = c.causal;
  // Qr, Kr, Vr hold T values already: the casts to T are exact.
  const course::Matrix<T> Qs = Qr.cast<T>(), Ks = Kr.cast<T>(), Vs = Vr.cast<T>();
  const auto sol = course::lab3::attention_forward<T>(Qs, Ks, Vs, opt);

  append_matrix(out.sol_O, sol.O.template cast<double>());
  append_vector(out.sol_lse, sol.lse);
  append_matrix(out.plain_O, plain.O);
  append_vector(out.plain_lse, plain.lse);
  append_matrix(out.ref_O, ref.O);
  append_vector(out.ref_lse, ref.lse);
  append_matrix(out.refu_O, in.ref_unrounded.O);
  append_vector(out.refu_lse, in.ref_unrounded.lse);
  append_matrix(out.ref_O_stored, reference::round_to<T>(ref.O));
  if constexpr (!std::is_same_v<T, double> && !std::is_same_v<T, float>) {
    if (c.N <= kEveryOpMaxN) {
      const auto every = every_op_attention<T>(Qr, Kr, Vr, scale, c.causal);
      append_matrix(out.every_O, every.O);
      append_vector(out.every_lse, every.lse);
    }
  }
}

double rmse(const std::vector<double>& got, const std::vector<double>& ref) {
  double sum = 0;
  long n = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::isfinite(got[i]) && std::isfinite(ref[i])) {
      sum += (got[i] - ref[i]) * (got[i] - ref[i]);
      ++n;
    }
  return n ? std::sqrt(sum / double(n)) : 0.0;
}

double max_abs_finite(const std::vector<double>& v) {
  double m = 0;
  for (double x : v)
    if (std::isfinite(x)) m = std::max(m, std::abs(x));
  return m;
}

Histogram histogram(const std::string& dtype, const std::string& comparison,
                    const std::vector<double>& got, const std::vector<double>& ref) {
  Histogram h{dtype, arithmetic_of(dtype), comparison};
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(got[i] - ref[i]);
    if (!std::isfinite(e)) continue;  // counted as bad_count by the error statistics
    if (e == 0) {
      ++h.zeros;
      continue;
    }
    const double l = std::log10(e);
    if (l < kHistLo) ++h.below;
    else if (l >= kHistHi) ++h.above;
    else h.counts[std::min(kHistBins - 1, int((l - kHistLo) / kHistStep))]++;
  }
  return h;
}

template <class T>
void measure_dtype(const Config& c, const std::vector<HeadInputs>& inputs, bool with_hist,
                   ConfigResult& result) {
  const std::string dtype = course::dtype_name<T>();
  std::vector<HeadData> per_head(inputs.size());
  for (std::size_t h = 0; h < inputs.size(); ++h) measure_head<T>(c, inputs[h], per_head[h]);
  HeadData all;
  auto cat = [&](std::vector<double> HeadData::*field) {
    for (auto& hd : per_head) (all.*field).insert((all.*field).end(), (hd.*field).begin(), (hd.*field).end());
  };
  for (auto f : {&HeadData::sol_O, &HeadData::sol_lse, &HeadData::plain_O, &HeadData::plain_lse,
                 &HeadData::ref_O, &HeadData::ref_lse, &HeadData::refu_O, &HeadData::refu_lse,
                 &HeadData::ref_O_stored, &HeadData::every_O, &HeadData::every_lse})
    cat(f);

  const grading::Shape shape_O{long(c.H), long(c.N), long(c.d)}, shape_lse{long(c.H), long(c.N)};
  auto add = [&](const std::string& comparison, const std::string& quantity,
                 const std::vector<double>& got, const std::vector<double>& ref) {
    Row r{dtype, arithmetic_of(dtype), comparison, quantity,
          grading::compare(got, ref, quantity == "O" ? shape_O : shape_lse),
          max_abs_finite(ref), rmse(got, ref)};
    result.rows.push_back(std::move(r));
  };
  add("solution_vs_ref", "O", all.sol_O, all.ref_O);
  add("solution_vs_ref", "LSE", all.sol_lse, all.ref_lse);
  add("plain_vs_ref", "O", all.plain_O, all.ref_O);
  add("plain_vs_ref", "LSE", all.plain_lse, all.ref_lse);
  add("solution_vs_plain", "O", all.sol_O, all.plain_O);
  add("solution_vs_plain", "LSE", all.sol_lse, all.plain_lse);
  add("solution_vs_ref_unrounded", "O", all.sol_O, all.refu_O);
  add("solution_vs_ref_unrounded", "LSE", all.sol_lse, all.refu_lse);
  add("plain_vs_ref_unrounded", "O", all.plain_O, all.refu_O);
  add("plain_vs_ref_unrounded", "LSE", all.plain_lse, all.refu_lse);
  add("input_rounding_only", "O", all.ref_O, all.refu_O);
  add("input_rounding_only", "LSE", all.ref_lse, all.refu_lse);
  add("output_rounding_only", "O", all.ref_O_stored, all.ref_O);
  if (!all.every_O.empty()) {
    add("every_op_vs_ref", "O", all.every_O, all.ref_O);
    add("every_op_vs_ref", "LSE", all.every_lse, all.ref_lse);
  }
  // The grader's band: a multiple of the plain implementation's max error plus a floor.
  const std::size_t first = result.rows.size() - (all.every_O.empty() ? 13 : 15);
  double plain_O = 0, plain_lse = 0, ref_O = 0, ref_lse = 0;
  for (std::size_t k = first; k < result.rows.size(); ++k) {
    const Row& r = result.rows[k];
    if (r.comparison != "plain_vs_ref") continue;
    (r.quantity == "O" ? plain_O : plain_lse) = r.stats.max_abs;
    (r.quantity == "O" ? ref_O : ref_lse) = r.ref_max_abs;
  }
  for (std::size_t k = first; k < result.rows.size(); ++k) {
    Row& r = result.rows[k];
    r.band = r.quantity == "O"
                 ? grading::tolerance(grading::Quantity::output, dtype, plain_O, ref_O).limit
                 : grading::tolerance(grading::Quantity::lse, dtype, plain_lse, ref_lse).limit;
  }
  if (with_hist) {
    result.hists.push_back(histogram(dtype, "solution_vs_ref", all.sol_O, all.ref_O));
    result.hists.push_back(histogram(dtype, "plain_vs_ref", all.plain_O, all.ref_O));
    result.hists.push_back(histogram(dtype, "solution_vs_ref_unrounded", all.sol_O, all.refu_O));
    result.hists.push_back(histogram(dtype, "output_rounding_only", all.ref_O_stored, all.ref_O));
    if (!all.every_O.empty())
      result.hists.push_back(histogram(dtype, "every_op_vs_ref", all.every_O, all.ref_O));
  }
}

// Everything about one configuration, on the calling thread.
ConfigResult measure(const Config& c, std::uint64_t seed, bool with_hist) {
  const double scale = course::default_softmax_scale(c.d);
  std::vector<HeadInputs> inputs;
  for (int h = 0; h < c.H; ++h) {
    inputs.push_back(make_inputs(c, h, seed));
    HeadInputs& in = inputs.back();
    in.ref_unrounded = reference::attention<double>(in.Q, in.K, in.V, scale, c.causal);
  }
  ConfigResult r;
  measure_dtype<double>(c, inputs, with_hist, r);
  measure_dtype<float>(c, inputs, with_hist, r);
  measure_dtype<course::bf16>(c, inputs, with_hist, r);
  measure_dtype<course::fp16>(c, inputs, with_hist, r);
  return r;
}

std::string csv(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}
std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6e", x);
  return buf;
}

struct Study {
  std::string name, varied;  // varied: which column the study sweeps
  std::vector<Config> configs;
};

std::vector<Study> studies(bool quick) {
  const Config main_shape{2, quick ? 256 : 1024, 64, 64, 1.0, false};
  std::vector<Study> s;
  s.push_back({"main", "-", {main_shape}});
  Config causal = main_shape;
  causal.causal = true;
  s.push_back({"main_causal", "-", {causal}});

  // FA3 section 4.3's inputs (outliers), at head dimension 128 as in its benchmarks.
  Config fa3 = main_shape;
  fa3.d = 128;
  fa3.block = 128;
  fa3.fa3_outliers = true;
  s.push_back({"fa3_outliers", "-", {fa3}});

  // One head in the N sweep: N = 4096 costs 16x what the main shape does per head, and 4096 x 64
  // outputs are plenty of samples for p50, p99 and max.
  Study n{"sweep_N", "N", {}};
  const std::vector<int> Ns = quick ? std::vector<int>{64, 128, 256}
                                    : std::vector<int>{64, 128, 256, 512, 1024, 2048, 4096};
  for (bool cz : {false, true})
    for (int N : Ns) {
      Config c = main_shape;
      c.H = 1;
      c.N = N;
      c.causal = cz;
      n.configs.push_back(c);
    }
  s.push_back(n);

  // 48, 100 and 384 do not divide N = 1024 (nor 256): the last tile is partial.
  Study b{"sweep_block", "block", {}};
  const std::vector<int> blocks = quick ? std::vector<int>{16, 48, 64}
                                        : std::vector<int>{16, 32, 48, 64, 100, 128, 256, 384, 512};
  for (int blk : blocks) {
    Config c = main_shape;
    c.block = blk;
    b.configs.push_back(c);
  }
  s.push_back(b);

  Study l{"sweep_logit_scale", "logit_scale", {}};
  const std::vector<double> scales = quick ? std::vector<double>{1, 16}
                                           : std::vector<double>{0.5, 1, 2, 4, 8, 16};
  for (double ls : scales) {
    Config c = main_shape;
    c.logit_scale = ls;
    l.configs.push_back(c);
  }
  s.push_back(l);
  return s;
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--out DIR] [--quick] [--seed S] [--jobs J]\n"
               "  --out DIR  where precision.csv, error_hist.csv and run_info.csv go (default build/report)\n"
               "  --quick    a reduced run (N <= 256) for the smoke test\n"
               "  --seed S   input seed (default: COURSE_SEED or 1)\n"
               "  --jobs J   threads, one configuration each (default 2)\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path out_dir = "build/report";
  bool quick = false;
  std::uint64_t seed = 1;
  if (const char* env = std::getenv("COURSE_SEED")) seed = std::strtoull(env, nullptr, 10);
  int jobs = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_dir = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--jobs" && i + 1 < argc) jobs = std::max(1, std::atoi(argv[++i]));
    else if (a == "-h" || a == "--help") return usage(argv[0]), 0;
    else return usage(argv[0]);
  }
  std::filesystem::create_directories(out_dir);
  const auto t0 = std::chrono::steady_clock::now();
  std::printf("[report] precision of %s vs the fp64 reference; seed %llu%s, %d threads\n", kWhat,
              static_cast<unsigned long long>(seed), quick ? " (quick)" : "", jobs);

  // Every distinct configuration once (the main shape recurs in three sweeps), the most
  // expensive first, on `jobs` threads.
  const std::vector<Study> all_studies = studies(quick);
  const Config main_config = all_studies.front().configs.front();
  std::vector<Config> todo;
  std::map<decltype(Config{}.key()), ConfigResult> done;
  for (const Study& st : all_studies)
    for (const Config& c : st.configs)
      if (done.emplace(c.key(), ConfigResult{}).second) todo.push_back(c);
  std::stable_sort(todo.begin(), todo.end(), [](const Config& a, const Config& b) {
    return double(a.H) * a.N * a.N * a.d > double(b.H) * b.N * b.N * b.d;
  });
  std::atomic<std::size_t> next{0};
  std::mutex lock;
  std::string failure;
  auto worker = [&] {
    for (std::size_t i; (i = next++) < todo.size();) {
      const Config& c = todo[i];
      const auto t = std::chrono::steady_clock::now();
      try {
        ConfigResult r = measure(c, seed, c.key() == main_config.key());
        std::lock_guard<std::mutex> g(lock);
        done[c.key()] = std::move(r);
        std::printf("[report] H=%d N=%-5d d=%d block=%-4d logit x%-4g %-10s %6.2f s\n", c.H,
                    c.N, c.d, c.block, c.logit_scale, c.causal ? "causal" : "non-causal",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
        std::fflush(stdout);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> g(lock);
        if (failure.empty()) failure = e.what();
        next = todo.size();
      }
    }
  };
  {
    std::vector<std::thread> threads;
    for (int j = 1; j < jobs; ++j) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
  }
  if (!failure.empty()) {
    std::fprintf(stderr, "[report] %s failed: %s\n", kWhat, failure.c_str());
    return 1;
  }

  std::ofstream rows_csv(out_dir / "precision.csv");
  rows_csv << "study,varied,dtype,arithmetic,comparison,quantity,H,N,d,block_q,block_k,"
              "logit_scale,causal,distribution,seed,max_abs,max_rel,p50_abs,p99_abs,bad_count,"
              "count,worst_index,worst_got,worst_ref,ref_max_abs,rmse,band,description\n";
  std::ofstream hist_csv(out_dir / "error_hist.csv");
  hist_csv << "study,dtype,arithmetic,comparison,bin_lo,bin_hi,count\n";
  double main_fp64_max_abs = -1;
  for (const Study& st : all_studies) {
    for (const Config& c : st.configs) {
      const ConfigResult& res = done.at(c.key());
      for (const Row& r : res.rows) {
        const auto& s = r.stats;
        rows_csv << st.name << ',' << st.varied << ',' << r.dtype << ',' << csv(r.arithmetic)
                 << ',' << r.comparison << ',' << r.quantity << ',' << c.H << ',' << c.N << ','
                 << c.d << ',' << c.block << ',' << c.block << ',' << c.logit_scale << ','
                 << (c.causal ? 1 : 0) << ',' << (c.fa3_outliers ? "fa3_outliers" : "normal")
                 << ',' << seed << ',' << num(s.max_abs) << ','
                 << num(s.max_rel) << ',' << num(s.p50_abs) << ',' << num(s.p99_abs) << ','
                 << s.bad_count << ',' << s.count << ',' << csv(s.index_string(s.worst)) << ','
                 << num(s.worst_got) << ',' << num(s.worst_ref) << ',' << num(r.ref_max_abs)
                 << ',' << num(r.rmse) << ',' << num(r.band) << ','
                 << csv(describe(r.comparison)) << '\n';
        if (st.name != "main") continue;
        if (r.dtype == "fp64" && r.comparison == "solution_vs_ref" && r.quantity == "O")
          main_fp64_max_abs = s.max_abs;
        if (r.comparison == "solution_vs_ref")
          std::printf("[report] main shape  %-32s %-3s max abs %.3e  p50 %.3e  p99 %.3e  max rel "
                      "%.3e  NaN/Inf %ld\n",
                      r.arithmetic.c_str(), r.quantity.c_str(), s.max_abs, s.p50_abs, s.p99_abs,
                      s.max_rel, s.bad_count);
      }
      if (st.name == "main")
        for (const Histogram& h : res.hists) {
          const std::string head =
              st.name + ',' + h.dtype + ',' + csv(h.arithmetic) + ',' + h.comparison + ',';
          hist_csv << head << "zero,zero," << h.zeros << '\n';
          hist_csv << head << "-inf," << num(kHistLo) << ',' << h.below << '\n';
          for (int k = 0; k < kHistBins; ++k)
            if (h.counts[k])
              hist_csv << head << num(kHistLo + k * kHistStep) << ','
                       << num(kHistLo + (k + 1) * kHistStep) << ',' << h.counts[k] << '\n';
          hist_csv << head << num(kHistHi) << ",inf," << h.above << '\n';
        }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream info(out_dir / "run_info.csv");
  info << "key,value\nseed," << seed << "\nquick," << (quick ? 1 : 0) << "\njobs," << jobs
       << "\nseconds," << seconds << "\nlabs," << (kLabs ? 1 : 0) << "\nmeasured," << kWhat
       << '\n';
  rows_csv.close();
  hist_csv.close();
  info.close();
  std::printf("[report] wrote precision.csv, error_hist.csv, run_info.csv to %s in %.1f s\n",
              out_dir.c_str(), seconds);
  // The report must be able to tell a broken solution: blockwise fp64 is exact up to rounding.
  if (!(main_fp64_max_abs >= 0 && main_fp64_max_abs < 1e-12)) {
    std::fprintf(stderr,
                 "[report] FAIL: blockwise fp64 vs one-shot fp64 max abs error %.3e is not at "
                 "rounding noise (< 1e-12): %s is wrong\n",
                 main_fp64_max_abs, kWhat);
    return 1;
  }
  return 0;
}
