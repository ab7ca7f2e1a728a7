// The backward's speed check on the grader's side (lab 9): the checked timing of the lab process's
// "time" request (gpu_lab::time_backward), whose rows are held to the fp64 reference in the same
// bf16 bands as every other backward check (backward_bands.hpp, compare_gradients).
//
// The lab process times its backward on the benchmark's shape (gpu_grading::SpeedConfig) with Q,
// K, V, dO and O from course::fill_normal (seeds seed .. seed + 4) and the LSE
// gpu_grading::synthetic_lse, and sends back what one randomly chosen timed call left in 16 rows
// of dQ and in 16 rows of dK and dV of one head. The grader draws the same values on the CPU
// (gpu_grading::seeded_rows) for that head only, and computes each block of rows from the
// smallest problem whose gradients they are:
//   dQ rows i: those queries against every key they see (P from the given LSE, D from the given
//     O: each row of dQ depends on its own row's statistics only);
//   dK and dV rows j: every query that sees those keys against them. Not causal, that is all N
//     queries against the 16 keys. Causal, queries first_key .. N - 1 against keys first_key ..
//     N - 1, of which the first 16 rows are compared: the reference's causal mask is aligned to
//     the bottom-right, so the keys must run to the last query for the mask to be the full
//     problem's (the keys past the 16 add columns that change none of the compared rows).
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "backward_bands.hpp"
#include "gpu_harness.hpp"
#include "gpu_wire.hpp"
#include "lab_process.hpp"
#include "speed_check.hpp"

namespace backward_grading {

using gpu_grading::SpeedCheck;
using gpu_grading::SpeedConfig;

// The inputs of the check's head as the timed call read them, for queries [q0, q0 + queries) and
// keys [k0, k0 + keys).
inline LabInputs seeded_inputs(const SpeedConfig& c, const SpeedCheck& check, int q0, int queries, int k0,
                               int keys) {
  using gpu_grading::seeded_rows;
  LabInputs x{seeded_rows(check.seed, c, check.head, q0, queries),
              seeded_rows(check.seed + 1, c, check.head, k0, keys),
              seeded_rows(check.seed + 2, c, check.head, k0, keys),
              seeded_rows(check.seed + 3, c, check.head, q0, queries),
              seeded_rows(check.seed + 4, c, check.head, q0, queries),
              Eigen::VectorXd(queries)};
  for (int i = 0; i < queries; ++i) x.lse(i) = gpu_grading::synthetic_lse(q0 + i, c.N, c.causal);
  return x;
}

// The timed call's rows (got: dQ rows, or dK and dV rows, the others empty) against the fp64
// backward of the sub-problem x, p (the leading rows of its gradients), in lab 7's bf16 bands.
inline bool timed_rows_match(const Grads& got, const LabInputs& x, const Problem& p, const std::string& about) {
  // "P from the given LSE": the inputs' O and LSE are not a forward pass's, and the backward's
  // definition from them (reference::plain_attention_backward in fp64) is what the kernel computes.
  const Grads ref = reference::plain_attention_backward<double>(x.Q, x.K, x.V, x.O, x.dO, x.lse, scale_of(p),
                                                                p.causal);
  return compare_gradients<bf16>(got, ref, x, p, about, /*tensor_cores=*/true);
}

// Rows [0, rows) of a kRows x d block of bf16 bits from the lab process.
inline Md timed_block(isolation::Packet& results, const SpeedConfig& c) {
  const std::vector<std::uint8_t> bits = gpu_wire::get_bytes(results);
  if (bits.size() != std::size_t(SpeedCheck::kRows) * c.d * 2)
    throw isolation::LabFailure("time: the lab process sent " + std::to_string(bits.size()) + " bytes of rows");
  const std::vector<double> values = gpu_grading::to_doubles(course::DType::bf16, bits);
  Md m(SpeedCheck::kRows, c.d);
  for (int r = 0; r < SpeedCheck::kRows; ++r)
    for (int t = 0; t < c.d; ++t) m(r, t) = values[std::size_t(r) * c.d + t];
  return m;
}

// The median milliseconds of the backward on the speed shape, timed in the student's lab process
// (solution = false) or in the solution's. Throws, and so the check fails, when the rows the
// checked call left are not the backward's gradients, or the timing is not a positive number.
inline double time_backward_in_lab(const SpeedConfig& c, bool solution) {
  const SpeedCheck check = gpu_grading::random_speed_check(c);
  isolation::Packet args;
  gpu_wire::put_speed_request(args, c, check);
  auto reply = (solution ? isolation::solution_lab() : isolation::lab()).call("time", args);
  const double ms = reply.results.get<double>();
  const Md dq = timed_block(reply.results, c), dk = timed_block(reply.results, c), dv = timed_block(reply.results, c);

  constexpr int kRows = SpeedCheck::kRows;
  const std::string call = "timed call " + std::to_string(check.checked_call + 1) + " of " +
                           std::to_string(SpeedCheck::kRepeats) + " (bf16 B=" + std::to_string(c.batch()) +
                           " H=" + std::to_string(c.heads()) + " N=" + std::to_string(c.N) + " d=" +
                           std::to_string(c.d) + (c.causal ? " causal" : "") + "), head " +
                           std::to_string(check.head) + ", inputs from seed " + std::to_string(check.seed) +
                           " (Q; K, V, dO, O from seed + 1 .. + 4; LSE log(keys seen) + 0.5)";
  const int q0 = check.first_row, k0 = check.first_key;
  // dQ rows q0 .. q0 + 15 see keys 0 .. q0 + 15 when causal (the bottom-right mask of 16 queries
  // over those keys is the same mask), every key otherwise.
  const int keys_seen = c.causal ? q0 + kRows : c.N;
  const Problem dq_problem{kRows, keys_seen, c.d, 64, 64, c.causal};
  const bool dq_ok = timed_rows_match({dq, Md(), Md()}, seeded_inputs(c, check, q0, kRows, 0, keys_seen), dq_problem,
                                      call + ", dQ rows " + std::to_string(q0) + ".." + std::to_string(q0 + kRows - 1));
  // dK and dV rows k0 .. k0 + 15: the queries that see them, against those keys (causal: and the
  // keys after them, see the top of the file).
  const int first_query = c.causal ? k0 : 0, queries = c.N - first_query, keys = c.causal ? c.N - k0 : kRows;
  const Problem dkv_problem{queries, keys, c.d, 64, 64, c.causal};
  const bool dkv_ok =
      timed_rows_match({Md(), dk, dv}, seeded_inputs(c, check, first_query, queries, k0, keys), dkv_problem,
                       call + ", dK and dV rows " + std::to_string(k0) + ".." + std::to_string(k0 + kRows - 1));
  if (!dq_ok || !dkv_ok)
    throw std::runtime_error(std::string(solution ? "the solution's" : "your") +
                             " gradients on the timed shape do not match the reference (the figures are above), "
                             "so the time does not count: " +
                             call + ". A kernel must compute what it is timed on.");
  if (!(ms > 0) || !std::isfinite(ms)) throw std::runtime_error("a timing of " + std::to_string(ms) + " ms");
  return ms;
}

}  // namespace backward_grading
