// The front door of every attention call (course/softmax_scale.hpp, course/attention.hpp), on the
// host: the scale's one rule and default, and each GPU forward lab's accepted set. No GPU is
// touched: check_forward reads pointers and shapes only.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "course/attention.hpp"
#include "course/softmax_scale.hpp"

using course::AttentionShape;
using course::BadInput;
using course::DType;
using course::ForwardRules;

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
