// One attention problem of the CPU attention graders (lab 3's forward, lab 7's backward): shapes,
// tiles, masking, scale and how Q and K are drawn, and how a failure message names it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "course/softmax_scale.hpp"
#include "grading.hpp"
#include "reference/data.hpp"

namespace grading {

struct AttentionProblem {
  int Nq, Nk, d;
  int block_q, block_k;
  bool causal = false;
  std::optional<double> scale = std::nullopt;
  reference::Distribution dist = reference::Distribution::normal;  // Q and K; V is always normal
};

// "Nq 64, Nk 80, d 16, block_q 16, block_k 8, causal, scale 0.3, normal Q/K", and the seed of
// the draw when it is not the run's.
inline std::string describe(const AttentionProblem& p, std::uint64_t seed) {
  std::string s = "Nq " + std::to_string(p.Nq) + ", Nk " + std::to_string(p.Nk) + ", d " +
                  std::to_string(p.d) + ", block_q " + std::to_string(p.block_q) + ", block_k " +
                  std::to_string(p.block_k) + (p.causal ? ", causal" : ", not causal");
  if (p.scale) {
    char buf[48];
    std::snprintf(buf, sizeof buf, ", scale %g", *p.scale);
    s += buf;
  }
  s += std::string(", ") + reference::to_string(p.dist) + " Q/K";
  if (seed != grading::seed()) s += ", inputs drawn with seed " + std::to_string(seed);
  return s;
}

// The softmax scale tau of a problem: its own, or 1/sqrt(d).
inline double scale_of(const AttentionProblem& p) {
  return course::softmax_scale(p.scale, p.d, "scale_of");
}

// The same problems with causal masking. P: AttentionProblem, or any problem type with a `causal`
// member (lab 7's GPU problems); a braced list means AttentionProblems.
template <class P = AttentionProblem>
std::vector<P> causal(std::vector<P> ps) {
  for (P& p : ps) p.causal = true;
  return ps;
}

// Causal problems with Nq != Nk, aligned bottom-right, for labs 3 and 7: with Nq > Nk the first
// Nq - Nk queries see no key (in the first two, a query tile holds rows of both kinds); with
// Nq < Nk the first key tiles are seen by every query. Odd lengths and tiles that do not divide them.
inline std::vector<AttentionProblem> causal_unequal_lengths() {
  return causal({
      {70, 20, 16, 16, 16}, {113, 64, 64, 32, 7}, {5, 3, 16, 64, 64},  // Nq > Nk
      {20, 70, 16, 16, 16}, {37, 300, 64, 16, 64}, {1, 113, 16, 8, 8},  // Nq < Nk
  });
}

// Why a count of exponentials can fall short of one per score in code that computes every
// probability: CountedFloat counts course::exp and course::exp2 of a CountedFloat only, so an
// exponential taken on a cast (std::exp(float(s)), std::exp2 of a double) is not seen. Said first
// in the work and streaming checks' messages of labs 3 and 7, before what else it could mean.
inline std::string uncounted_exponentials_note() {
  return "fewer exponentials than scores: if every probability is computed, some exponentials "
         "were not counted; the counter sees course::exp and course::exp2 of the element type "
         "only, never std::exp or std::exp2 of a cast to float or double, so call those";
}

// The lab's options for a problem: lab 3's AttentionOptions or lab 7's BackwardOptions.
template <class Options>
Options options_of(const AttentionProblem& p) {
  Options o;
  o.block_q = p.block_q;
  o.block_k = p.block_k;
  o.causal = p.causal;
  o.scale = p.scale;
  return o;
}

}  // namespace grading
