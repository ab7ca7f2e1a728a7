// One attention call as the GPU labs receive it: what each lab accepts, and every input check
// made once here, so that a lab states only its rules and its code starts from a call already
// checked. The forward labs (4, 5 and 8) and reference/gpu's standard attention check with
// check_forward; lab 6's decoding (check_decoding) and lab 7's backward (check_backward) are
// forward calls with more inputs, checked by check_forward and then for what they add (the
// backward checks its dtype and the deterministic mode before check_forward). The softmax
// scale's one rule is in course/softmax_scale.hpp.
//
// Plain C++ (no Eigen, no device code): host code compiled by nvcc or by the host compiler
// includes it, the graders and the references as well as the labs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "course/errors.hpp"
#include "course/gpu.hpp"  // DType, AttentionShape, cudaStream_t
#include "course/math_constants.hpp"
#include "course/softmax_scale.hpp"

namespace course {

// ---------------------------------------------------------------------------------------------
// The GPU forward labs' call: what a lab accepts, and the call once checked
// ---------------------------------------------------------------------------------------------

// What one lab's flash_attention_forward accepts. Every lab also requires non-null pointers,
// Q, K, V and O 16-byte aligned (their vector, cp.async or TMA loads), B, H, Nq, Nk >= 1 and
// B * H <= 65535 (one grid row per head).
struct ForwardRules {
  const char* function;        // for the messages: "lab5::flash_attention_forward"
  bool fp32 = false, bf16 = false, fp16 = false;  // the element types it accepts
  int head_dims[3] = {0, 0, 0};                   // the head dimensions it accepts (0: none)
};

inline constexpr ForwardRules kLab4Rules{"lab4::flash_attention_forward", true, true, false, {32, 64, 128}};
inline constexpr ForwardRules kLab5Rules{"lab5::flash_attention_forward", false, true, true, {64, 128, 0}};
inline constexpr ForwardRules kLab8Rules{"lab8::flash_attention_forward", false, true, true, {64, 128, 0}};

// A forward call after its checks: what every lab's kernel parameters are filled from.
struct ForwardCall {
  const void* q = nullptr;  // [B*H, Nq, d], row-major, of `dtype`
  const void* k = nullptr;  // [B*H, Nk, d]
  const void* v = nullptr;  // [B*H, Nk, d]
  void* o = nullptr;        // [B*H, Nq, d]
  float* lse = nullptr;     // [B*H, Nq]
  DType dtype = DType::fp32;
  int batch_heads = 0;      // B * H
  int nq = 0, nk = 0, d = 0;
  bool causal = false;
  float scale = 0.0f;       // tau, never 0 here
  float scale_log2 = 0.0f;  // tau * log2(e): exp(tau (s - m)) = exp2(s tau log2(e) - m tau log2(e))
  cudaStream_t stream = nullptr;
};

namespace detail {
inline bool accepts_dtype(const ForwardRules& r, DType t) {
  return (t == DType::fp32 && r.fp32) || (t == DType::bf16 && r.bf16) || (t == DType::fp16 && r.fp16);
}
inline std::string accepted_dtypes(const ForwardRules& r) {
  std::string s;
  for (DType t : {DType::fp32, DType::bf16, DType::fp16})
    if (accepts_dtype(r, t)) s += (s.empty() ? "" : " or ") + std::string(dtype_name(t));
  return s;
}
inline bool accepts_head_dim(const ForwardRules& r, int d) {
  for (int a : r.head_dims)
    if (a != 0 && a == d) return true;
  return false;
}
inline std::string accepted_head_dims(const ForwardRules& r) {  // "32, 64 or 128"
  std::string s, last;
  for (int a : r.head_dims) {
    if (a == 0) continue;
    if (!last.empty()) s += (s.empty() ? "" : ", ") + last;
    last = std::to_string(a);
  }
  return s.empty() ? last : s + " or " + last;
}
inline int largest_head_dim(const ForwardRules& r) {
  int largest = 0;
  for (int a : r.head_dims) largest = a > largest ? a : largest;
  return largest;
}
inline bool is_aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
}  // namespace detail

// A forward call's shape: d one of the rules' head dimensions, B, H, Nq, Nk >= 1, and B * H
// within the grid. Also what a lab's functions that take a shape alone check (lab 6's
// choose_num_splits, through check_decoding_shape); `where` names the function.
inline void check_forward_shape(const ForwardRules& rules, const std::string& where, const AttentionShape& shape) {
  if (!detail::accepts_head_dim(rules, shape.d))
    throw BadInput(where + ": head dimension d must be " + detail::accepted_head_dims(rules) + ", got " +
                   std::to_string(shape.d));
  if (shape.B < 1 || shape.H < 1 || shape.Nq < 1 || shape.Nk < 1)
    throw BadInput(where + ": B, H, Nq and Nk must be >= 1 (got B=" + std::to_string(shape.B) +
                   " H=" + std::to_string(shape.H) + " Nq=" + std::to_string(shape.Nq) +
                   " Nk=" + std::to_string(shape.Nk) + ")");
  if (static_cast<std::int64_t>(shape.B) * shape.H > 65535)
    throw BadInput(where + ": B * H must be <= 65535 (one grid row per head)");
}

// Every input check of a forward call, in one place; throws course::BadInput naming the function,
// the argument and the rule it broke.
inline ForwardCall check_forward(const ForwardRules& rules, const void* Q, const void* K,
                                 const void* V, void* O, float* lse, DType dtype,
                                 const AttentionShape& shape, bool causal, float scale,
                                 cudaStream_t stream) {
  const std::string where = rules.function;
  if (!Q || !K || !V || !O || !lse)
    throw BadInput(where + ": Q, K, V, O and lse must be non-null device pointers");
  if (!detail::accepts_dtype(rules, dtype))
    throw BadInput(where + ": dtype must be " + detail::accepted_dtypes(rules) + ", got " + dtype_name(dtype));
  check_forward_shape(rules, where, shape);
  const std::int64_t batch_heads = static_cast<std::int64_t>(shape.B) * shape.H;
  if (!(detail::is_aligned16(Q) && detail::is_aligned16(K) && detail::is_aligned16(V) &&
        detail::is_aligned16(O)))
    throw BadInput(where + ": Q, K, V and O must be 16-byte aligned");

  ForwardCall call;
  call.q = Q, call.k = K, call.v = V, call.o = O, call.lse = lse;
  call.dtype = dtype;
  call.batch_heads = static_cast<int>(batch_heads);
  call.nq = shape.Nq, call.nk = shape.Nk, call.d = shape.d;
  call.causal = causal;
  call.scale = softmax_scale(scale, shape.d, where);
  call.scale_log2 = call.scale * kLog2eF;
  call.stream = stream;
  return call;
}

// ---------------------------------------------------------------------------------------------
// The caller-owned workspace of labs 6 and 7
// ---------------------------------------------------------------------------------------------

// Device scratch that the caller allocates once and passes to every call: the library never
// allocates, so a call never waits for a cudaMalloc (include/course/lab6_decoding.hpp says why).
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

namespace detail {
// Throws unless the workspace is a 16-byte aligned buffer of at least `needed` bytes. `purpose`
// says what those bytes hold ("for 8 splits", or empty), `sized_by` names the function that
// gives the size.
inline void check_workspace(const std::string& where, const Workspace& workspace, std::size_t needed,
                            const std::string& purpose, const std::string& sized_by) {
  std::string got;
  if (workspace.data == nullptr) got = "a null pointer";
  else if (!is_aligned16(workspace.data)) got = "a pointer that is not 16-byte aligned";
  else if (workspace.bytes < needed) got = std::to_string(workspace.bytes) + " bytes";
  else return;
  throw BadInput(where + ": options.workspace must be a 16-byte aligned device buffer of at least " +
                 std::to_string(needed) + " bytes" + (purpose.empty() ? "" : " " + purpose) + " (" + sized_by +
                 "), got " + got);
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Lab 6: split-KV decoding, a forward call with a few query rows and a long KV cache
// ---------------------------------------------------------------------------------------------

// What split-KV decoding accepts: a forward call's rules (its Nk is the KV cache's capacity
// Nk_max), at most max_query_rows query rows per head (longer queries are prefill), a split
// count >= 1 (0: the library chooses), and a workspace for the splits' partial results.
struct DecodingRules {
  ForwardRules forward;             // the decoding call: its name, dtypes and head dimensions
  int max_query_rows = 0;           // Nq <= max_query_rows
  const char* merge = "";           // the merge alone, for its messages
  const char* workspace_bytes = ""; // the function that sizes the workspace, for the messages
};

inline constexpr DecodingRules kLab6Rules{
    .forward = {"lab6::split_kv_forward", true, true, false, {64, 128, 0}},
    .max_query_rows = 16,
    .merge = "lab6::merge_partials",
    .workspace_bytes = "lab6::split_kv_workspace_bytes"};

// A decoding call after its checks: the forward call (nk is the cache's capacity Nk_max) and
// what the splits add, the workspace already cut into the splits' partial results.
struct DecodingCall : ForwardCall {
  int heads = 0;                   // H: (batch, head) bh belongs to batch element bh / H
  const int* seqlens_k = nullptr;  // device [B] KV lengths, or null: every length is nk
  int num_splits = 0;              // >= 1: the count asked for, or the library's choice
  int rows = 0;                    // B * H * Nq: the rows of O and of each split's partial results
  float* o_partial = nullptr;      // the workspace's O_s [num_splits, rows, d], fp32
  float* lse_partial = nullptr;    // after it, LSE_s [num_splits, rows], fp32
};

// Bytes of the splits' partial results, O_s then LSE_s in fp32: num_splits * B*H*Nq * (d + 1)
// floats. The shape is the caller's to check (check_decoding_shape).
inline std::size_t decoding_workspace_bytes(const AttentionShape& shape, int num_splits) {
  const std::size_t rows = static_cast<std::size_t>(shape.B) * shape.H * shape.Nq;
  return static_cast<std::size_t>(num_splits) * rows * (static_cast<std::size_t>(shape.d) + 1) * sizeof(float);
}

namespace detail {
inline void check_query_rows(const DecodingRules& rules, const std::string& where, int nq) {
  if (nq > rules.max_query_rows)
    throw BadInput(where + ": Nq = " + std::to_string(nq) + " query rows per head is more than " +
                   std::to_string(rules.max_query_rows) +
                   " (longer queries are prefill: a forward kernel's job, as in labs 4 and 5)");
}
}  // namespace detail

// A decoding shape alone (no pointers): a forward call's shape with at most max_query_rows rows.
// For the functions that take only a shape; `where` names the one called.
inline void check_decoding_shape(const DecodingRules& rules, const std::string& where,
                                 const AttentionShape& shape) {
  check_forward_shape(rules.forward, where, shape);
  detail::check_query_rows(rules, where, shape.Nq);
}

// A split count as the caller gives it: >= 1, or 0 to let the library choose.
inline void check_split_count(const std::string& where, int num_splits) {
  if (num_splits < 0)
    throw BadInput(where + ": num_splits = " + std::to_string(num_splits) +
                   " (use >= 1, or 0 to let the library choose)");
}

// Every input check of a decoding call: check_forward's, then the decoding's own (Nq, the split
// count, the workspace). choose_splits() gives the library's split count when num_splits is 0;
// it is called after every check but the workspace's, which needs the count (it may query the
// device).
template <typename ChooseSplits>
DecodingCall check_decoding(const DecodingRules& rules, const void* Q, const void* K, const void* V, void* O,
                            float* lse, DType dtype, const AttentionShape& shape, bool causal, float scale,
                            const int* seqlens_k, int num_splits, const Workspace& workspace,
                            cudaStream_t stream, ChooseSplits choose_splits) {
  const std::string where = rules.forward.function;
  DecodingCall call;
  static_cast<ForwardCall&>(call) = check_forward(rules.forward, Q, K, V, O, lse, dtype, shape, causal, scale, stream);
  detail::check_query_rows(rules, where, shape.Nq);
  check_split_count(where, num_splits);

  call.heads = shape.H;
  call.seqlens_k = seqlens_k;
  call.num_splits = num_splits > 0 ? num_splits : choose_splits();
  call.rows = call.batch_heads * call.nq;
  detail::check_workspace(where, workspace, decoding_workspace_bytes(shape, call.num_splits),
                          "for " + std::to_string(call.num_splits) + " splits", rules.workspace_bytes);
  call.o_partial = static_cast<float*>(workspace.data);
  call.lse_partial = call.o_partial + static_cast<std::size_t>(call.num_splits) * call.rows * call.d;
  return call;
}

// The merge alone (lab 6's kernel 2 as an entry point of its own): the fp32 partial results of
// num_splits >= 1 splits of `rows` >= 1 rows of 1 <= d <= the largest head dimension, merged into
// O in one of the decoding's dtypes.
inline void check_merge(const DecodingRules& rules, const float* o_partial, const float* lse_partial,
                        const void* O, const float* lse, DType dtype, int rows, int num_splits, int d) {
  const std::string where = rules.merge;
  if (!o_partial || !lse_partial || !O || !lse)
    throw BadInput(where + ": O_partial, lse_partial, O and lse must be non-null device pointers");
  const int largest_d = detail::largest_head_dim(rules.forward);
  if (rows < 1 || num_splits < 1 || d < 1 || d > largest_d)
    throw BadInput(where + ": need rows >= 1, num_splits >= 1 and 1 <= d <= " + std::to_string(largest_d) +
                   " (got rows=" + std::to_string(rows) + " num_splits=" + std::to_string(num_splits) +
                   " d=" + std::to_string(d) + ")");
  if (!detail::accepts_dtype(rules.forward, dtype))
    throw BadInput(where + ": dtype must be " + detail::accepted_dtypes(rules.forward) + ", got " +
                   dtype_name(dtype));
}

// ---------------------------------------------------------------------------------------------
// Lab 7, parts 2 and 3: the backward pass, a forward call read back with its gradients
// ---------------------------------------------------------------------------------------------

// What the backward's two kernels accept, each as a forward's rules: the backward reads a
// forward call's Q, K, V, O and lse under the same rules, and adds dO and the gradients dQ, dK
// and dV (the shapes of O, Q, K and V, non-null and 16-byte aligned) and a workspace.
struct BackwardRules {
  ForwardRules cuda_cores;          // part 2's kernel
  ForwardRules tensor_cores;        // part 3's kernel
  const char* workspace_bytes = ""; // the function that sizes the workspace, for the messages
  // The deterministic mode (BackwardGpuOptions::deterministic): 0 where the lab does not offer
  // it; else the query rows per turn counter in the workspace (at most the kernel's query tile,
  // so that every tile has its own counter).
  int turn_counter_rows = 0;
};

inline constexpr BackwardRules kLab7Rules{
    .cuda_cores = {"lab7::flash_attention_backward", true, true, false, {64, 128, 0}},
    .tensor_cores = {"lab7::flash_attention_backward", false, true, true, {64, 128, 0}},
    .workspace_bytes = "lab7::backward_workspace_bytes"};

// Lab 9's Hopper backward has one kernel, on tensor cores: the tensor_cores rules, and no dtype
// on CUDA cores (its calls are checked with tensor_cores = true). It offers the deterministic
// mode: a turn counter per 64 query rows (its query tiles are 64 or 128 rows).
inline constexpr BackwardRules kLab9Rules{
    .cuda_cores = {"lab9::flash_attention_backward", false, false, false, {0, 0, 0}},
    .tensor_cores = {"lab9::flash_attention_backward", false, true, true, {64, 128, 0}},
    .workspace_bytes = "lab9::backward_workspace_bytes",
    .turn_counter_rows = 64};

// A backward call after its checks: the forward call whose outputs it reads (o and lse are the
// backward's inputs, and only read), what the backward adds, and the workspace already cut into
// the fp32 dQ accumulator and D.
struct BackwardCall : ForwardCall {
  const void* dout = nullptr;  // dO [B*H, Nq, d]
  void* dq = nullptr;          // [B*H, Nq, d]
  void* dk = nullptr;          // [B*H, Nk, d]
  void* dv = nullptr;          // [B*H, Nk, d]
  bool tensor_cores = false;   // which kernel computes the products (part 3's, or part 2's)
  float* dq_accum = nullptr;   // the workspace's dQ accumulator [B*H*Nq, d], fp32
  float* delta = nullptr;      // after it, D_i = rowsum(dO_i o O_i) [B*H*Nq], fp32
  int* dq_turns = nullptr;     // after D, the turn counters [B*H, query tiles] (rules.turn_counter_rows)
  bool deterministic = false;  // dQ added in a fixed order (the rules offer it)
};

// Bytes of the backward's workspace, the fp32 dQ accumulator and D: B*H*Nq * (d + 1) floats; and,
// where the lab offers the deterministic mode, one int per rules.turn_counter_rows query rows of
// each head (its turn counters).
// Asks only what the size needs (B, H, Nq, d >= 1), so that a caller can size the buffer before
// the call's own checks; throws BadInput naming rules.workspace_bytes otherwise.
inline std::size_t backward_workspace_bytes(const BackwardRules& rules, const AttentionShape& shape) {
  if (shape.B < 1 || shape.H < 1 || shape.Nq < 1 || shape.d < 1)
    throw BadInput(std::string(rules.workspace_bytes) + ": B, H, Nq and d must be >= 1 (got B=" +
                   std::to_string(shape.B) + " H=" + std::to_string(shape.H) + " Nq=" + std::to_string(shape.Nq) +
                   " d=" + std::to_string(shape.d) + ")");
  const std::size_t heads = static_cast<std::size_t>(shape.B) * shape.H;
  std::size_t bytes = heads * shape.Nq * (static_cast<std::size_t>(shape.d) + 1) * sizeof(float);
  if (rules.turn_counter_rows > 0) {
    const std::size_t tiles = (static_cast<std::size_t>(shape.Nq) + rules.turn_counter_rows - 1) / rules.turn_counter_rows;
    bytes += heads * tiles * sizeof(int);
  }
  return bytes;
}

namespace detail {
// The first check of a backward call: does the chosen kernel take this dtype? The message says
// which kernel does.
inline void check_backward_kernel_dtype(const BackwardRules& rules, bool tensor_cores, DType dtype) {
  const ForwardRules& kernel = tensor_cores ? rules.tensor_cores : rules.cuda_cores;
  const ForwardRules& other = tensor_cores ? rules.cuda_cores : rules.tensor_cores;
  if (accepts_dtype(kernel, dtype)) return;
  std::string message = std::string(kernel.function) + ": the " + (tensor_cores ? "tensor-core" : "CUDA-core") +
                        " kernel takes " + accepted_dtypes(kernel) + ", not " + dtype_name(dtype);
  if (accepts_dtype(other, dtype))
    message += std::string(" (") + dtype_name(dtype) + " runs on " +
               (tensor_cores ? "CUDA cores: BackwardKernel::cuda_cores" : "tensor cores: BackwardKernel::tensor_cores") +
               " or automatic)";
  throw BadInput(message);
}
}  // namespace detail

// Every input check of a backward call, in this order: the chosen kernel's dtype, the
// deterministic mode where the rules do not offer it, check_forward's checks with that kernel's
// rules (Q, K, V, O, lse, d, the shape, the scale), then dO, the gradients and the workspace.
// tensor_cores: part 3's kernel, else part 2's.
inline BackwardCall check_backward(const BackwardRules& rules, bool tensor_cores, const void* Q, const void* K,
                                   const void* V, const void* O, const void* dO, const float* lse, void* dQ,
                                   void* dK, void* dV, DType dtype, const AttentionShape& shape, bool causal,
                                   float scale, const Workspace& workspace, cudaStream_t stream,
                                   bool deterministic = false) {
  detail::check_backward_kernel_dtype(rules, tensor_cores, dtype);
  const ForwardRules& kernel = tensor_cores ? rules.tensor_cores : rules.cuda_cores;
  const std::string where = kernel.function;
  if (deterministic && rules.turn_counter_rows == 0)
    throw BadInput(where + ": options.deterministic is not offered here: this backward adds dQ with atomics, in "
                           "whatever order the CTAs come (lab 9's Hopper backward has the deterministic mode)");
  BackwardCall call;
  // ForwardCall holds O and lse as the forward's outputs; the backward reads them only, and the
  // kernels' parameters take them const.
  static_cast<ForwardCall&>(call) = check_forward(kernel, Q, K, V, const_cast<void*>(O), const_cast<float*>(lse),
                                                  dtype, shape, causal, scale, stream);
  if (!dO || !dQ || !dK || !dV) throw BadInput(where + ": dO, dQ, dK and dV must be non-null device pointers");
  if (!(detail::is_aligned16(dO) && detail::is_aligned16(dQ) && detail::is_aligned16(dK) &&
        detail::is_aligned16(dV)))
    throw BadInput(where + ": dO, dQ, dK and dV must be 16-byte aligned");
  detail::check_workspace(where, workspace, backward_workspace_bytes(rules, shape), "", rules.workspace_bytes);

  call.dout = dO, call.dq = dQ, call.dk = dK, call.dv = dV;
  call.tensor_cores = tensor_cores;
  call.dq_accum = static_cast<float*>(workspace.data);  // first: its rows of d floats stay 16-byte aligned
  call.delta = call.dq_accum + static_cast<std::size_t>(call.batch_heads) * call.nq * call.d;
  if (rules.turn_counter_rows > 0)
    call.dq_turns = reinterpret_cast<int*>(call.delta + static_cast<std::size_t>(call.batch_heads) * call.nq);
  call.deterministic = deterministic;
  return call;
}

}  // namespace course
