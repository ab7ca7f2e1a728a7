// The one tolerance table of the course. Every grader takes its bands from here.
//
// The rule (FlashAttention's own test rule, made explicit):
//   allowed max abs error = factor * (max abs error of the plain same-precision implementation
//                                     on the same inputs, against the same fp64 reference)
//                         + floor * max(1, max |reference|)
// fp64 has no plain baseline worth the name (it *is* the reference's arithmetic), so its band
// is a pure floor at rounding-noise level. The reasons are printed in every failure message.
#pragma once

#include <string>

namespace grading {

enum class Quantity {
  probability,  // softmax output, in [0, 1], stored in the lab's dtype
  lse,          // log-sum-exp, stored in the accumulation dtype (fp32 or fp64)
  output,       // attention output O, stored in the lab's dtype
};

struct Band {
  double factor;       // multiple of the plain implementation's error
  double floor;        // absolute floor, times max(1, max |reference|)
  const char* reason;  // why these numbers
};

// dtype is "fp64", "fp32", "bf16" or "fp16" (course::dtype_name<T>()).
const Band& band_for(Quantity q, const std::string& dtype);

struct Tolerance {
  double limit;         // the allowed max abs error
  std::string explain;  // "2 x plain bf16 (1.9e-03) + 3.9e-03 x 1.0 = 7.8e-03 (bf16 probability: ...)"
};

Tolerance tolerance(Quantity q, const std::string& dtype, double plain_max_abs, double ref_max_abs);

const char* to_string(Quantity q);

}  // namespace grading
