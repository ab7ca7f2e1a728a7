// Lab 8 (beyond): the online softmax of one K/V tile (FA2 Algorithm 1, line 9 and the rescale
// half of line 10) on wgmma accumulator fragments. It is lab 5's online softmax of its step 6 (the
// exp2-FMA form, without step 7's lazy rescale) on a different array shape: a wgmma accumulator of N columns
// is float[N/2] per thread, and element 4j + 2r + c is row g + 8r, column 8j + 2q + c
// (mma_sm90.cuh section 3; q = lane % 4). Each thread holds two rows (r = 0, 1); the 4 lanes of
// a quad hold a whole row, so a row reduction is the thread's own values plus two shuffles.
#pragma once

#include <cmath>
#include <cstring>

#include "course/quad_reduce.cuh"

namespace course::lab8::detail {

// quad_max and quad_sum (a row's max and sum over its quad): course/quad_reduce.cuh.

// 2^x in one MUFU.EX2 (ex2.approx.ftz: relative error ~2^-22, far below bf16/fp16 rounding of P).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^x on the FMA pipes, for step 8. Write x = j + f with j the nearest integer and f in
// [-1/2, 1/2]: adding 1.5 * 2^23 rounds x to an integer that lands in the low bits of the sum's
// mantissa (t), and t - 1.5 * 2^23 is that integer as a float. 2^f comes from a degree-3
// polynomial (minimax on [-1/2, 1/2], relative error 7.5e-5: bf16 rounds P by up to 2^-8), and
// 2^j is applied by adding j to the exponent field, i.e. t's low bits shifted up by 23. Here x is
// a score minus the row max, so x <= 0; x is clamped at -125 so that the exponent field stays
// normal, and below -125 (masked scores are -inf) the result is 0, as ex2.approx gives: a row
// that sees no key must keep l = 0.
// It compiles for the host too, so that a CPU test (grader/gpu/tests/exp2_poly_host_test.cu)
// holds it to exp2 over the whole range; bit_cast_to_float and bit_cast_to_int (memcpy) are what
// __int_as_float and __float_as_int do on the device.
__host__ __device__ __forceinline__ float bit_cast_to_float(int i) {
  float f;
  memcpy(&f, &i, sizeof f);
  return f;
}
__host__ __device__ __forceinline__ int bit_cast_to_int(float f) {
  int i;
  memcpy(&i, &f, sizeof i);
  return i;
}

__host__ __device__ __forceinline__ float exp2_poly(float x) {
  float y = 0.0f;
  // TODO: exp2_poly (see the lab README)
  // xc = max(x, -125); t = xc + 1.5 * 2^23; f = xc - (t - 1.5 * 2^23);
  // p = ((0.05517166 f + 0.24261113) f + 0.69326097) f + 0.99992806 (three fmaf);
  // y = the float whose bits are bits(p) + (bits(t) << 23), or 0 if x < -125
  return y;
}

// Line 9, on the kBlockN scores s of this thread's two rows:
//   m_new = max(m_old, rowmax(S));   P = 2^(S*c - m_new*c) with c = scale*log2(e)
//   alpha = 2^(m_old*c - m_new*c);   l = alpha*l + rowsum(P)
// S is overwritten by P; alpha[r] is the factor by which row r of O must be rescaled (the rescale
// half of line 10, rescale_output) before P V is added. m is kept in raw score units; row_sum is
// this lane's part of l (the quad adds the parts once, in store_output). A row that has seen only
// -inf keeps m = -inf: we subtract 0 instead, so P = 2^-inf = 0 and no NaN comes from -inf - -inf.
// Step 8 (kPolyOf8 > 0): column group j (keys 8j .. 8j+7) takes exp2_poly when j % 8 < kPolyOf8.
template <int kBlockN, int kPolyOf8 = 0>
__device__ __forceinline__ void softmax_tile(float (&s)[kBlockN / 2], float (&row_max)[2],
                                             float (&row_sum)[2], float scale_log2,
                                             float (&alpha)[2]) {
  // TODO: softmax_tile (see the lab README)
  // row r (0 or 1) is s[4j + 2r] and s[4j + 2r + 1] for j < kBlockN/8: reduce its max over the
  // quad, guard the fully masked row (subtract 0 when m_new = -inf), exponentiate with one FFMA
  // and exp2_approx (step 8: exp2_poly for column groups j with j % 8 < kPolyOf8), update
  // row_sum; alpha[r] = 1 when the max did not move
}

// The rescale half of line 10: O = diag(alpha) O. o[4j + 2r + c] belongs to row r.
template <int kHeadDim>
__device__ __forceinline__ void rescale_output(float (&o)[kHeadDim / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) o[i] *= alpha[(i >> 1) & 1];
}

// Line 9 and the rescale of line 10 together (steps 1-5: O is not being written by a product
// while the softmax runs; step 6 calls the two halves apart).
template <int kBlockN, int kHeadDim>
__device__ __forceinline__ void online_softmax(float (&s)[kBlockN / 2], float (&o)[kHeadDim / 2],
                                               float (&row_max)[2], float (&row_sum)[2],
                                               float scale_log2) {
  float alpha[2];
  softmax_tile<kBlockN>(s, row_max, row_sum, scale_log2, alpha);
  rescale_output<kHeadDim>(o, alpha);
}

}  // namespace course::lab8::detail
