// The bands of lab 7's backward checks, shared by lab 7's grader (its CPU and GPU parts) and lab
// 9's (the Hopper backward, graded like lab 7's tensor-core kernel): the inputs a problem gives
// the lab, the plain backward with the tensor cores' roundings, and the comparison of dQ, dK and
// dV with the fp64 reference inside their derived bands (grader/common/tolerances.hpp).
#pragma once

#include <cmath>
#include <string>
#include <type_traits>

#include "attention_problem.hpp"
#include "compare.hpp"
#include "reference/data.hpp"
#include "reference/reference.hpp"

namespace backward_grading {

using course::bf16;
using course::fp16;
using grading::Case;
using grading::Md;
using grading::Quantity;
using grading::describe;
using grading::scale_of;
using reference::Distribution;
using Problem = grading::AttentionProblem;
using Grads = reference::AttentionGradients<double>;

// What the lab is given for one problem, as the fp64 values it holds (see the top of the file).
struct LabInputs {
  Md Q, K, V, dO, O;
  Eigen::VectorXd lse;
};

template <class T>
LabInputs lab_inputs(const Problem& p, std::uint64_t seed, const std::string& label) {
  reference::Rng rng(seed, "lab7/" + label);
  const auto in = reference::attention_inputs(p.Nq, p.Nk, p.d, p.dist, rng);
  const Md dO = reference::random_matrix(p.Nq, p.d, Distribution::normal, rng);
  LabInputs x{reference::round_to<T>(in.Q), reference::round_to<T>(in.K),
              reference::round_to<T>(in.V), reference::round_to<T>(dO), Md(), Eigen::VectorXd()};
  const auto forward = reference::attention<double>(x.Q, x.K, x.V, scale_of(p), p.causal);
  x.O = reference::round_to<T>(forward.O);
  x.lse = forward.lse.cast<course::accum_t<T>>().template cast<double>();
  return x;
}

// For the fp32 bands (grading::with_gradient_score_rounding): how far each gradient moves, to
// first order and per u32 (times sqrt(d): a random walk), when a correct code rounds otherwise than
// the plain backward does. Two sources, computed in fp64 from the lab's inputs:
//   scores: every S_ij rounded by up to u32 c_ij, with c_ij = scale sum_t |q_it k_jt|;
//   dP_ij - D_i: two dot products of d terms that cancel (exactly, when a row sees one key: then
//     O_i = V_j and dS = 0), summed in different orders by a correct code (D in a pass of its own,
//     dP in the tile loop, as FA2 does): each rounded by up to u32 e_ij, with
//     e_ij = sum_t |dO_it| (|V_jt| + |O_it|). It moves dS_ij by P_ij u32 e_ij.
struct Sensitivity {
  double dQ = 0, dK = 0, dV = 0;
};
inline Sensitivity score_rounding_sensitivity(const LabInputs& x, const Problem& p) {
  const double tau = scale_of(p);
  const Md S = reference::scores<double>(x.Q, x.K, tau, p.causal);
  Md P = Md::Zero(S.rows(), S.cols());  // exp(S - LSE), as the API defines it
  for (Eigen::Index c = 0; c < S.cols(); ++c)
    for (Eigen::Index r = 0; r < S.rows(); ++r)
      if (std::isfinite(x.lse(r))) P(r, c) = std::exp(S(r, c) - x.lse(r));
  const Md PC = P.cwiseProduct(tau * (x.Q.cwiseAbs() * x.K.cwiseAbs().transpose()));
  const Eigen::VectorXd D = x.dO.cwiseProduct(x.O).rowwise().sum();
  const Md dP = x.dO * x.V.transpose();
  // |dS| moved by the scores (P c |dP - D|) and by the cancellation of dP and D (P e).
  const Eigen::VectorXd dO_O = x.dO.cwiseAbs().cwiseProduct(x.O.cwiseAbs()).rowwise().sum();
  const Md E = (x.dO.cwiseAbs() * x.V.cwiseAbs().transpose()).colwise() + dO_O;
  const Md W = PC.cwiseProduct((dP.colwise() - D).cwiseAbs()) + P.cwiseProduct(E);
  return {tau * (W * x.K.cwiseAbs()).maxCoeff(), tau * (W.transpose() * x.Q.cwiseAbs()).maxCoeff(),
          (PC.transpose() * x.dO.cwiseAbs()).maxCoeff()};
}

// The plain backward with the tensor cores' roundings (part 3): S, P, dP, D and dS in fp32 from
// the lab's inputs, P and dS rounded once to T (they are the 16-bit operands of the mma, as in
// FlashAttention-2), every product accumulated in fp32, the gradients left in fp32 (their one
// rounding to T is the per-element band's own term).
template <class T>
Grads plain_tensor_core_backward(const LabInputs& x, const Problem& p) {
  using Mf = Eigen::MatrixXf;
  const float tau = static_cast<float>(scale_of(p));
  const Mf q = x.Q.cast<float>(), k = x.K.cast<float>(), v = x.V.cast<float>(), o = x.O.cast<float>(),
           dout = x.dO.cast<float>();
  const Mf S = reference::scores<float>(q, k, tau, p.causal);
  Mf P = Mf::Zero(S.rows(), S.cols());
  for (Eigen::Index c = 0; c < S.cols(); ++c)
    for (Eigen::Index r = 0; r < S.rows(); ++r)
      if (std::isfinite(x.lse(r))) P(r, c) = std::exp(S(r, c) - static_cast<float>(x.lse(r)));
  const Eigen::VectorXf D = dout.cwiseProduct(o).rowwise().sum();
  const Mf dS = P.cwiseProduct((dout * v.transpose()).colwise() - D);
  const Mf P16 = reference::round_to<T>(P.cast<double>()).template cast<float>();
  const Mf dS16 = reference::round_to<T>(dS.cast<double>()).template cast<float>();
  return {(tau * (dS16 * k)).cast<double>(), (tau * (dS16.transpose() * q)).cast<double>(),
          (P16.transpose() * dout).cast<double>()};
}

// dQ, dK and dV against `ref`, each in its band: FlashAttention's rule against the plain
// same-dtype backward on the same inputs (reference::plain_attention_backward), widened in fp32
// by the scores' rounding and in bf16 and fp16 by the fp32 error E32 of the same inputs; for bf16
// and fp16 also the per-element band of one rounding, whose fp32 term is E32 (see
// grader/common/tolerances.hpp for each). With `tensor_cores`, E32 is the error of
// plain_tensor_core_backward instead of the plain fp32 backward's. A gradient of `got` with fewer
// rows than the reference's is compared on the leading rows; an empty one is not compared.
template <class T>
bool compare_gradients(const Grads& got, const Grads& ref, const LabInputs& x, const Problem& p,
                       const std::string& inputs, bool tensor_cores = false) {
  const std::string dtype = course::dtype_name<T>();
  const Grads plain = reference::plain_attention_backward<T>(x.Q, x.K, x.V, x.O, x.dO, x.lse,
                                                             scale_of(p), p.causal);
  const bool per_element = grading::element_band_for(Quantity::gradient, dtype) != nullptr;
  Grads plain32;  // the fp32 yardstick of the per-element band (16-bit dtypes only)
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, fp16>) {
    if (per_element)
      plain32 = tensor_cores ? plain_tensor_core_backward<T>(x, p)
                             : reference::plain_attention_backward<float>(x.Q, x.K, x.V, x.O, x.dO, x.lse,
                                                                          scale_of(p), p.causal);
  }
  const Sensitivity sensitivity =
      dtype == "fp64" ? Sensitivity{} : score_rounding_sensitivity(x, p);
  struct Named {
    const char* name;
    const Md Grads::*member;
    double Sensitivity::*sensitivity;
  };
  bool ok = true;
  for (const Named& g : {Named{"dQ", &Grads::dQ, &Sensitivity::dQ},
                         Named{"dK", &Grads::dK, &Sensitivity::dK},
                         Named{"dV", &Grads::dV, &Sensitivity::dV}}) {
    // A speed check sends back a few rows of some gradients only: an empty one is not compared,
    // and a shorter one is compared with the leading rows of the reference and the yardsticks.
    const Eigen::Index rows = (got.*g.member).rows();
    if (rows == 0) continue;
    const Md r = (ref.*g.member).topRows(rows);
    const Case c{std::string("attention_backward ") + g.name, dtype,
                 {long(r.rows()), long(r.cols())}, inputs};
    const grading::Tolerance fa_rule =
        grading::band_against_plain(Quantity::gradient, dtype, r, (plain.*g.member).topRows(rows));
    if (per_element) {
      // E32: what a correct code's fp32 arithmetic may add before the one rounding.
      const double fp32_error = grading::compare_matrices((plain32.*g.member).topRows(rows), r).max_abs +
                                grading::score_rounding_walk(sensitivity.*g.sensitivity, p.d);
      ok &= grading::expect_close_within(c, got.*g.member, r,
                                         grading::with_fp32_error(fa_rule, dtype, fp32_error)) &&
            grading::expect_within_element_band(c, Quantity::gradient, got.*g.member, r,
                                                fp32_error);
    } else {
      ok &= grading::expect_close_within(
          c, got.*g.member, r,
          grading::with_gradient_score_rounding(fa_rule, dtype, sensitivity.*g.sensitivity, p.d));
    }
  }
  return ok;
}

}  // namespace backward_grading
