// The front door of every attention call (course/softmax_scale.hpp, course/attention.hpp), on the
// host: the scale's one rule and default, each GPU forward lab's accepted set, and what lab 6's
// decoding and lab 7's backward add to a forward call. No GPU is touched: the checks read
// pointers and shapes only. Each rule of labs 6 and 7 is shown from both sides: the call at its
// limit is accepted, and the same call one step past it (the bug a planted check would let
// through) is rejected with a message that names the rule.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "course/attention.hpp"
#include "course/softmax_scale.hpp"

using course::AttentionShape;
using course::BadInput;
using course::DType;
using course::ForwardRules;
using course::Workspace;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Five 16-byte aligned stand-ins for device pointers (never dereferenced).
alignas(16) unsigned char storage[5][64];
const void* Q = storage[0];
const void* K = storage[1];
const void* V = storage[2];
void* O = storage[3];
float* lse = reinterpret_cast<float*>(storage[4]);

AttentionShape shape(int d, int B = 2, int H = 3, int Nq = 100, int Nk = 150) { return {B, H, Nq, Nk, d}; }

course::ForwardCall call(const ForwardRules& r, DType t, const AttentionShape& s, float scale = 0.0f) {
  return course::check_forward(r, Q, K, V, O, lse, t, s, true, scale, nullptr);
}

}  // namespace

TEST_CASE("the scale: 1/sqrt(d) when not given, else finite and > 0") {
  CHECK(course::default_softmax_scale(64) == 0.125);
  CHECK(course::softmax_scale(std::nullopt, 16, "f") == 0.25);
  CHECK(course::softmax_scale(std::optional<double>(0.3), 16, "f") == 0.3);
  for (double bad : {0.0, -0.5, double(kNaN), double(kInf)})
    CHECK_THROWS_AS(course::softmax_scale(std::optional<double>(bad), 16, "f"), BadInput);

  CHECK(course::softmax_scale(0.0f, 128, "f") == float(1.0 / std::sqrt(128.0)));
  CHECK(course::softmax_scale(2.0f, 128, "f") == 2.0f);
  for (float bad : {-0.5f, kNaN, kInf, -kInf}) CHECK_THROWS_AS(course::softmax_scale(bad, 128, "f"), BadInput);
  CHECK_THROWS_WITH_AS(course::softmax_scale(-1.0f, 64, "lab6::split_kv_forward"),
                       doctest::Contains("lab6::split_kv_forward: scale must be finite and > 0"), BadInput);
}

TEST_CASE("each lab's accepted element types and head dimensions") {
  struct Case {
    const ForwardRules& rules;
    bool fp32, bf16, fp16;
    bool d32, d64, d128;
  };
  for (const Case& c : {Case{course::kLab4Rules, true, true, false, true, true, true},
                        Case{course::kLab5Rules, false, true, true, false, true, true},
                        Case{course::kLab8Rules, false, true, true, false, true, true}}) {
    CAPTURE(c.rules.function);
    auto accepts = [&](DType t, int d) {
      try {
        call(c.rules, t, shape(d));
        return true;
      } catch (const BadInput&) {
        return false;
      }
    };
    const int good_d = c.d64 ? 64 : 32;
    CHECK(accepts(DType::fp32, good_d) == c.fp32);
    CHECK(accepts(DType::bf16, good_d) == c.bf16);
    CHECK(accepts(DType::fp16, good_d) == c.fp16);
    const DType good_t = c.bf16 ? DType::bf16 : DType::fp32;
    CHECK(accepts(good_t, 32) == c.d32);
    CHECK(accepts(good_t, 64) == c.d64);
    CHECK(accepts(good_t, 128) == c.d128);
    for (int d : {0, 16, 48, 96, 256}) CHECK_FALSE(accepts(good_t, d));
  }
}

TEST_CASE("every other input check, with messages that name the rule") {
  const ForwardRules& r = course::kLab5Rules;
  CHECK_THROWS_WITH_AS(course::check_forward(r, nullptr, K, V, O, lse, DType::bf16, shape(64), false, 0.0f, nullptr),
                       doctest::Contains("non-null"), BadInput);
  CHECK_THROWS_WITH_AS(course::check_forward(r, Q, K, V, O, nullptr, DType::bf16, shape(64), false, 0.0f, nullptr),
                       doctest::Contains("non-null"), BadInput);
  const void* misaligned = storage[1] + 4;
  CHECK_THROWS_WITH_AS(course::check_forward(r, Q, misaligned, V, O, lse, DType::bf16, shape(64), false, 0.0f, nullptr),
                       doctest::Contains("16-byte aligned"), BadInput);
  CHECK_THROWS_WITH_AS(call(r, DType::bf16, shape(64, 1, 1, 0, 10)), doctest::Contains("Nq=0"), BadInput);
  CHECK_THROWS_AS(call(r, DType::bf16, shape(64, 1, 1, 10, 0)), BadInput);
  CHECK_THROWS_AS(call(r, DType::bf16, shape(64, 0, 1, 10, 10)), BadInput);
  CHECK_THROWS_WITH_AS(call(r, DType::bf16, shape(64, 256, 256)), doctest::Contains("B * H must be <= 65535"),
                       BadInput);
  CHECK_NOTHROW(call(r, DType::bf16, shape(64, 255, 257)));  // 65535 heads: the grid's y limit
  CHECK_THROWS_WITH_AS(call(r, DType::fp32, shape(64)), doctest::Contains("dtype must be bf16 or fp16, got fp32"),
                       BadInput);
  CHECK_THROWS_WITH_AS(call(r, DType::bf16, shape(48)), doctest::Contains("d must be 64 or 128, got 48"), BadInput);
  CHECK_THROWS_AS(call(r, DType::bf16, shape(64), -1.0f), BadInput);
  CHECK_THROWS_AS(call(r, DType::bf16, shape(64), kNaN), BadInput);
}

TEST_CASE("the checked call carries what the kernels need") {
  const course::ForwardCall c = call(course::kLab8Rules, DType::fp16, shape(128, 2, 3, 100, 150));
  CHECK(c.q == Q);
  CHECK(c.o == O);
  CHECK(c.lse == lse);
  CHECK(c.dtype == DType::fp16);
  CHECK(c.batch_heads == 6);
  CHECK(c.nq == 100);
  CHECK(c.nk == 150);
  CHECK(c.d == 128);
  CHECK(c.causal);
  CHECK(c.scale == float(1.0 / std::sqrt(128.0)));
  CHECK(c.scale_log2 == c.scale * course::kLog2eF);
  CHECK(call(course::kLab4Rules, DType::fp32, shape(32), 0.3f).scale == 0.3f);
  CHECK_THROWS_WITH_AS(call(course::kLab4Rules, DType::fp32, shape(16)), doctest::Contains("32, 64 or 128, got 16"),
                       BadInput);
}

// ---------------------------------------------------------------------------------------------
// Lab 6: split-KV decoding
// ---------------------------------------------------------------------------------------------

namespace {

// Seven more aligned stand-ins: dO, dQ, dK, dV and three workspaces. The workspace's bytes are
// what the call is told, never touched.
alignas(16) unsigned char more[7][64];
const void* dO = more[0];
void* dQ = more[1];
void* dK = more[2];
void* dV = more[3];
Workspace workspace(std::size_t bytes) { return {more[4], bytes}; }

// The decoding shape as check_decoding reads it: Nk is the cache's capacity Nk_max.
AttentionShape decode_shape(int Nq, int d = 64, int Nk_max = 1000, int B = 2, int H = 3) {
  return {B, H, Nq, Nk_max, d};
}

int never_called() {
  FAIL("the library's split count was asked for though the call gave one");
  return 1;
}

course::DecodingCall decoding(DType t, const AttentionShape& s, int splits, std::size_t bytes, float scale = 0.0f) {
  return course::check_decoding(course::kLab6Rules, Q, K, V, O, lse, t, s, true, scale, nullptr, splits,
                                workspace(bytes), nullptr, never_called);
}

std::size_t enough(const AttentionShape& s, int splits) { return course::decoding_workspace_bytes(s, splits); }

// doctest's matcher from a message built at run time.
doctest::Contains contains(const std::string& text) { return doctest::Contains(doctest::String(text.c_str())); }

}  // namespace

TEST_CASE("lab 6: decoding accepts fp32 and bf16, d 64 and 128, 1 to 16 query rows") {
  for (DType t : {DType::fp32, DType::bf16})
    for (int d : {64, 128})
      for (int nq : {1, 4, 16}) {
        CAPTURE(nq);
        const AttentionShape s = decode_shape(nq, d);
        CHECK_NOTHROW(decoding(t, s, 8, enough(s, 8)));
      }
  const AttentionShape s = decode_shape(1);
  CHECK_THROWS_WITH_AS(decoding(DType::fp16, s, 8, enough(s, 8)),
                       doctest::Contains("lab6::split_kv_forward: dtype must be fp32 or bf16, got fp16"), BadInput);
  for (int d : {32, 48, 96, 256}) {
    const AttentionShape bad = decode_shape(1, d);
    CHECK_THROWS_WITH_AS(decoding(DType::fp32, bad, 8, enough(bad, 8)),
                         contains("d must be 64 or 128, got " + std::to_string(d)), BadInput);
  }
}

TEST_CASE("lab 6: each decoding rule, at its limit and one step past it") {
  // Query rows: 16 is decoding, 17 is prefill (the bug: a kernel sized for 16 rows given 17).
  const AttentionShape s16 = decode_shape(16), s17 = decode_shape(17);
  CHECK_NOTHROW(decoding(DType::bf16, s16, 4, enough(s16, 4)));
  CHECK_THROWS_WITH_AS(decoding(DType::bf16, s17, 4, enough(s17, 4)),
                       doctest::Contains("lab6::split_kv_forward: Nq = 17 query rows per head is more than 16"),
                       BadInput);
  const AttentionShape s0 = decode_shape(0);
  CHECK_THROWS_WITH_AS(decoding(DType::bf16, s0, 4, 1 << 20), doctest::Contains("Nq=0"), BadInput);
  const AttentionShape no_cache = decode_shape(1, 64, 0);
  CHECK_THROWS_WITH_AS(decoding(DType::bf16, no_cache, 4, 1 << 20), doctest::Contains("Nk=0"), BadInput);

  // The workspace: exactly split_kv_workspace_bytes is enough, one byte less is not.
  const AttentionShape s = decode_shape(4, 128, 4096, 1, 1);
  const std::size_t need = enough(s, 8);
  CHECK(need == 8 * 4 * (128 + 1) * sizeof(float));
  CHECK_NOTHROW(decoding(DType::fp32, s, 8, need));
  CHECK_THROWS_WITH_AS(decoding(DType::fp32, s, 8, need - 1),
                       contains("at least " + std::to_string(need) +
                                         " bytes for 8 splits (lab6::split_kv_workspace_bytes), got " +
                                         std::to_string(need - 1) + " bytes"),
                       BadInput);
  CHECK_THROWS_WITH_AS(course::check_decoding(course::kLab6Rules, Q, K, V, O, lse, DType::fp32, s, false, 0.0f,
                                              nullptr, 8, Workspace{nullptr, need}, nullptr, never_called),
                       doctest::Contains("got a null pointer"), BadInput);
  CHECK_THROWS_WITH_AS(course::check_decoding(course::kLab6Rules, Q, K, V, O, lse, DType::fp32, s, false, 0.0f,
                                              nullptr, 8, Workspace{more[4] + 8, need}, nullptr, never_called),
                       doctest::Contains("got a pointer that is not 16-byte aligned"), BadInput);

  // The split count: 1 is the least given, -1 is rejected; 0 asks the library, after every
  // other check, and the workspace is then checked for the library's count.
  CHECK_NOTHROW(decoding(DType::fp32, s, 1, enough(s, 1)));
  CHECK_THROWS_WITH_AS(decoding(DType::fp32, s, -1, need), doctest::Contains("num_splits = -1"), BadInput);
  int asked = 0;
  auto library_says_5 = [&] { return ++asked, 5; };
  const course::DecodingCall chosen = course::check_decoding(course::kLab6Rules, Q, K, V, O, lse, DType::fp32, s,
                                                             false, 0.0f, nullptr, 0, workspace(enough(s, 5)),
                                                             nullptr, library_says_5);
  CHECK(asked == 1);
  CHECK(chosen.num_splits == 5);
  CHECK_THROWS_WITH_AS(course::check_decoding(course::kLab6Rules, Q, K, V, O, lse, DType::fp32, s, false, 0.0f,
                                              nullptr, 0, workspace(enough(s, 5) - 1), nullptr, library_says_5),
                       doctest::Contains("for 5 splits"), BadInput);
  asked = 0;
  CHECK_THROWS_AS(course::check_decoding(course::kLab6Rules, nullptr, K, V, O, lse, DType::fp32, s, false, 0.0f,
                                         nullptr, 0, workspace(need), nullptr, library_says_5),
                  BadInput);
  CHECK(asked == 0);  // a bad call never reaches the device query

  // What check_forward checks, decoding checks too: pointers, alignment, B * H, the scale.
  CHECK_THROWS_WITH_AS(course::check_decoding(course::kLab6Rules, Q, K, V, O, nullptr, DType::fp32, s, false, 0.0f,
                                              nullptr, 8, workspace(need), nullptr, never_called),
                       doctest::Contains("lab6::split_kv_forward: Q, K, V, O and lse must be non-null"), BadInput);
  CHECK_THROWS_WITH_AS(course::check_decoding(course::kLab6Rules, Q, storage[1] + 4, V, O, lse, DType::fp32, s,
                                              false, 0.0f, nullptr, 8, workspace(need), nullptr, never_called),
                       doctest::Contains("16-byte aligned"), BadInput);
  const AttentionShape too_many_heads = decode_shape(1, 64, 1000, 256, 256);
  CHECK_THROWS_WITH_AS(decoding(DType::fp32, too_many_heads, 1, 1 << 30), doctest::Contains("B * H must be <= 65535"),
                       BadInput);
  CHECK_THROWS_WITH_AS(decoding(DType::fp32, s, 8, need, -0.5f),
                       doctest::Contains("lab6::split_kv_forward: scale must be finite and > 0"), BadInput);
}

TEST_CASE("lab 6: the checked decoding call carries the splits and the workspace's layout") {
  const AttentionShape s = decode_shape(3, 64, 500, 2, 5);
  const int seqlens[2] = {500, 7};
  const course::DecodingCall c = course::check_decoding(course::kLab6Rules, Q, K, V, O, lse, DType::bf16, s, true,
                                                        0.5f, seqlens, 6, workspace(enough(s, 6)), nullptr,
                                                        never_called);
  CHECK(c.q == Q);
  CHECK(c.nk == 500);
  CHECK(c.batch_heads == 10);
  CHECK(c.heads == 5);
  CHECK(c.seqlens_k == seqlens);
  CHECK(c.num_splits == 6);
  CHECK(c.rows == 30);
  CHECK(c.scale == 0.5f);
  CHECK(static_cast<void*>(c.o_partial) == more[4]);
  CHECK(c.lse_partial == c.o_partial + 6 * 30 * 64);  // O_s [6, 30, 64], then LSE_s [6, 30]
  CHECK(reinterpret_cast<const unsigned char*>(c.lse_partial + 6 * 30) ==
        more[4] + course::decoding_workspace_bytes(s, 6));
}

TEST_CASE("lab 6: the shape alone, and the merge alone") {
  CHECK_NOTHROW(course::check_decoding_shape(course::kLab6Rules, "lab6::choose_num_splits", decode_shape(16)));
  CHECK_THROWS_WITH_AS(course::check_decoding_shape(course::kLab6Rules, "lab6::choose_num_splits", decode_shape(17)),
                       doctest::Contains("lab6::choose_num_splits: Nq = 17"), BadInput);
  CHECK_THROWS_WITH_AS(course::check_decoding_shape(course::kLab6Rules, "lab6::choose_num_splits",
                                                    decode_shape(1, 96)),
                       doctest::Contains("lab6::choose_num_splits: head dimension d must be 64 or 128"), BadInput);
  CHECK_NOTHROW(course::check_split_count("f", 0));
  CHECK_THROWS_AS(course::check_split_count("f", -1), BadInput);

  const float* partial = reinterpret_cast<const float*>(more[5]);
  auto merge = [&](DType t, int rows, int splits, int d) {
    course::check_merge(course::kLab6Rules, partial, partial, O, lse, t, rows, splits, d);
  };
  CHECK_NOTHROW(merge(DType::fp32, 1, 1, 1));
  CHECK_NOTHROW(merge(DType::bf16, 16, 64, 128));
  CHECK_THROWS_WITH_AS(merge(DType::fp32, 16, 0, 64), doctest::Contains("lab6::merge_partials: need rows >= 1"),
                       BadInput);
  CHECK_THROWS_WITH_AS(merge(DType::fp32, 16, 2, 129), doctest::Contains("1 <= d <= 128 (got rows=16 num_splits=2 d=129)"),
                       BadInput);
  CHECK_THROWS_AS(merge(DType::fp32, 0, 2, 64), BadInput);
  CHECK_THROWS_AS(merge(DType::fp32, 16, 2, 0), BadInput);
  CHECK_THROWS_WITH_AS(merge(DType::fp16, 16, 2, 64), doctest::Contains("dtype must be fp32 or bf16, got fp16"),
                       BadInput);
  CHECK_THROWS_WITH_AS(course::check_merge(course::kLab6Rules, partial, nullptr, O, lse, DType::fp32, 1, 1, 64),
                       doctest::Contains("non-null"), BadInput);
}

// ---------------------------------------------------------------------------------------------
// Lab 7, parts 2 and 3: the backward pass
// ---------------------------------------------------------------------------------------------

namespace {

course::BackwardCall backward(bool tensor_cores, DType t, const AttentionShape& s, std::size_t bytes,
                              float scale = 0.0f) {
  return course::check_backward(course::kLab7Rules, tensor_cores, Q, K, V, O, dO, lse, dQ, dK, dV, t, s, false,
                                scale, workspace(bytes), nullptr);
}

std::size_t backward_bytes(const AttentionShape& s) { return course::backward_workspace_bytes(course::kLab7Rules, s); }

}  // namespace

TEST_CASE("lab 7: fp32 and bf16 on CUDA cores, bf16 and fp16 on tensor cores, d 64 and 128") {
  struct Case {
    bool tensor_cores;
    bool fp32, bf16, fp16;
  };
  for (const Case& c : {Case{false, true, true, false}, Case{true, false, true, true}}) {
    CAPTURE(c.tensor_cores);
    auto accepts = [&](DType t, int d) {
      const AttentionShape s = shape(d);
      try {
        backward(c.tensor_cores, t, s, backward_bytes(s));
        return true;
      } catch (const BadInput&) {
        return false;
      }
    };
    for (int d : {64, 128}) {
      CHECK(accepts(DType::fp32, d) == c.fp32);
      CHECK(accepts(DType::bf16, d) == c.bf16);
      CHECK(accepts(DType::fp16, d) == c.fp16);
    }
    for (int d : {32, 48, 96, 256}) CHECK_FALSE(accepts(DType::bf16, d));
  }
  // The planted bugs of a kernel choice left unchecked: fp16 on CUDA cores, fp32 on tensor cores.
  // Each message says which kernel takes the dtype.
  const AttentionShape s = shape(64);
  CHECK_THROWS_WITH_AS(backward(false, DType::fp16, s, backward_bytes(s)),
                       doctest::Contains("lab7::flash_attention_backward: the CUDA-core kernel takes fp32 or bf16, "
                                         "not fp16 (fp16 runs on tensor cores: BackwardKernel::tensor_cores or "
                                         "automatic)"),
                       BadInput);
  CHECK_THROWS_WITH_AS(backward(true, DType::fp32, s, backward_bytes(s)),
                       doctest::Contains("lab7::flash_attention_backward: the tensor-core kernel takes bf16 or fp16, "
                                         "not fp32 (fp32 runs on CUDA cores: BackwardKernel::cuda_cores or "
                                         "automatic)"),
                       BadInput);
  CHECK_THROWS_WITH_AS(backward(true, DType::bf16, shape(96), backward_bytes(shape(96))),
                       doctest::Contains("head dimension d must be 64 or 128, got 96"), BadInput);
}

TEST_CASE("lab 7: each backward rule, at its limit and one step past it") {
  const AttentionShape s = shape(64, 1, 1, 100, 64);
  const std::size_t need = backward_bytes(s);
  CHECK(need == 100 * (64 + 1) * sizeof(float));
  CHECK_NOTHROW(backward(false, DType::fp32, s, need));
  CHECK_THROWS_WITH_AS(backward(false, DType::fp32, s, need - 1),
                       contains("at least " + std::to_string(need) +
                                         " bytes (lab7::backward_workspace_bytes), got " + std::to_string(need - 1) +
                                         " bytes"),
                       BadInput);
  CHECK_THROWS_WITH_AS(course::check_backward(course::kLab7Rules, true, Q, K, V, O, dO, lse, dQ, dK, dV, DType::bf16,
                                              s, false, 0.0f, Workspace{nullptr, need}, nullptr),
                       doctest::Contains("got a null pointer"), BadInput);
  CHECK_THROWS_WITH_AS(course::check_backward(course::kLab7Rules, true, Q, K, V, O, dO, lse, dQ, dK, dV, DType::bf16,
                                              s, false, 0.0f, Workspace{more[4] + 4, need}, nullptr),
                       doctest::Contains("not 16-byte aligned"), BadInput);

  // Q, K, V, O and lse as check_forward checks them; dO and the gradients as the backward adds them.
  CHECK_THROWS_WITH_AS(course::check_backward(course::kLab7Rules, false, nullptr, K, V, O, dO, lse, dQ, dK, dV,
                                              DType::fp32, s, false, 0.0f, workspace(need), nullptr),
                       doctest::Contains("Q, K, V, O and lse must be non-null"), BadInput);
  CHECK_THROWS_WITH_AS(course::check_backward(course::kLab7Rules, false, Q, K, V, O, dO, nullptr, dQ, dK, dV,
                                              DType::fp32, s, false, 0.0f, workspace(need), nullptr),
                       doctest::Contains("Q, K, V, O and lse must be non-null"), BadInput);
  for (int which = 0; which < 4; ++which) {
    CAPTURE(which);
    const void* grads[4] = {dO, dQ, dK, dV};
    grads[which] = nullptr;
    CHECK_THROWS_WITH_AS(course::check_backward(course::kLab7Rules, false, Q, K, V, O, grads[0], lse,
                                                const_cast<void*>(grads[1]), const_cast<void*>(grads[2]),
                                                const_cast<void*>(grads[3]), DType::fp32, s, false, 0.0f,
                                                workspace(need), nullptr),
                         doctest::Contains("dO, dQ, dK and dV must be non-null"), BadInput);
    grads[which] = more[which] + 4;
    CHECK_THROWS_WITH_AS(course::check_backward(course::kLab7Rules, false, Q, K, V, O, grads[0], lse,
                                                const_cast<void*>(grads[1]), const_cast<void*>(grads[2]),
                                                const_cast<void*>(grads[3]), DType::fp32, s, false, 0.0f,
                                                workspace(need), nullptr),
                         doctest::Contains("dO, dQ, dK and dV must be 16-byte aligned"), BadInput);
  }
  CHECK_THROWS_WITH_AS(course::check_backward(course::kLab7Rules, false, Q, K, V, storage[3] + 4, dO, lse, dQ, dK,
                                              dV, DType::fp32, s, false, 0.0f, workspace(need), nullptr),
                       doctest::Contains("Q, K, V and O must be 16-byte aligned"), BadInput);
  CHECK_THROWS_WITH_AS(backward(false, DType::fp32, shape(64, 1, 1, 0, 64), need), doctest::Contains("Nq=0"),
                       BadInput);
  CHECK_THROWS_WITH_AS(backward(false, DType::fp32, shape(64, 1, 1, 100, 0), need), doctest::Contains("Nk=0"),
                       BadInput);
  CHECK_THROWS_WITH_AS(backward(false, DType::fp32, shape(64, 256, 256, 1, 1), std::size_t(1) << 30),
                       doctest::Contains("B * H must be <= 65535"), BadInput);
  CHECK_THROWS_WITH_AS(backward(false, DType::fp32, s, need, kInf),
                       doctest::Contains("lab7::flash_attention_backward: scale must be finite and > 0"), BadInput);

  // The workspace's size asks only for what it needs, so that a caller can size it first.
  CHECK(backward_bytes(shape(32, 1, 1, 10, 0)) == 10 * 33 * sizeof(float));
  CHECK_THROWS_WITH_AS(backward_bytes(shape(64, 1, 1, 0, 10)),
                       doctest::Contains("lab7::backward_workspace_bytes: B, H, Nq and d must be >= 1"), BadInput);
}

TEST_CASE("lab 7: the checked backward call carries the gradients and the workspace's layout") {
  const AttentionShape s = shape(128, 2, 3, 100, 150);
  const course::BackwardCall c = backward(true, DType::fp16, s, backward_bytes(s), 0.25f);
  CHECK(c.q == Q);
  CHECK(c.o == O);
  CHECK(c.lse == lse);
  CHECK(c.dout == dO);
  CHECK(c.dq == dQ);
  CHECK(c.dk == dK);
  CHECK(c.dv == dV);
  CHECK(c.tensor_cores);
  CHECK(c.batch_heads == 6);
  CHECK(c.nq == 100);
  CHECK(c.nk == 150);
  CHECK(c.scale == 0.25f);
  CHECK(c.scale_log2 == 0.25f * course::kLog2eF);
  CHECK(static_cast<void*>(c.dq_accum) == more[4]);
  CHECK(c.delta == c.dq_accum + 6 * 100 * 128);  // dQ's accumulator [600, 128], then D [600]
  CHECK(reinterpret_cast<const unsigned char*>(c.delta + 600) == more[4] + backward_bytes(s));
  CHECK_FALSE(backward(false, DType::bf16, s, backward_bytes(s)).tensor_cores);
  CHECK(c.dq_turns == nullptr);  // lab 7 has no deterministic mode, so no turn counters
  CHECK_FALSE(c.deterministic);
}

TEST_CASE("the deterministic mode: lab 7 rejects it, lab 9 has it and its turn counters in the workspace") {
  const AttentionShape s = shape(128, 2, 3, 100, 150);
  const std::size_t need7 = backward_bytes(s);
  CHECK_THROWS_WITH_AS(course::check_backward(course::kLab7Rules, true, Q, K, V, O, dO, lse, dQ, dK, dV, DType::bf16,
                                              s, false, 0.0f, workspace(need7), nullptr, /*deterministic=*/true),
                       doctest::Contains("lab7::flash_attention_backward: options.deterministic is not offered here"),
                       BadInput);
  // Lab 9: lab 7's workspace, then one int per 64 query rows of each head (100 rows: 2).
  const std::size_t need9 = course::backward_workspace_bytes(course::kLab9Rules, s);
  CHECK(need9 == need7 + 6 * 2 * sizeof(int));
  for (bool deterministic : {false, true}) {
    CAPTURE(deterministic);
    const course::BackwardCall c = course::check_backward(course::kLab9Rules, true, Q, K, V, O, dO, lse, dQ, dK, dV,
                                                          DType::bf16, s, false, 0.0f, workspace(need9), nullptr,
                                                          deterministic);
    CHECK(c.deterministic == deterministic);
    CHECK(reinterpret_cast<const float*>(c.dq_turns) == c.delta + 600);  // after D [600]
    CHECK(reinterpret_cast<const unsigned char*>(c.dq_turns + 12) == more[4] + need9);
  }
  CHECK_THROWS_WITH_AS(course::check_backward(course::kLab9Rules, true, Q, K, V, O, dO, lse, dQ, dK, dV, DType::bf16,
                                              s, false, 0.0f, workspace(need9 - 1), nullptr, true),
                       doctest::Contains("lab9::backward_workspace_bytes"), BadInput);
}
