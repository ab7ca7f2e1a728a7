#include "tolerances.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <utility>

namespace grading {

namespace {

// The figures quoted in the reasons are measured by `./course report` (see
// lectures/03-streaming-attention.md, "Measure it") and by the graders themselves.
const std::map<std::pair<Quantity, std::string>, Band>& table() {
  static const std::map<std::pair<Quantity, std::string>, Band> t = {
      {{Quantity::probability, "fp64"},
       {0, 1e-12,
        "fp64: a correct streaming softmax differs from one-shot only in summation order, "
        "rounding noise of ~1e-16 per element; 1e-12 leaves 1e4x headroom yet catches every "
        "algorithmic bug (they err by 1e-3 or more)"}},
      {{Quantity::probability, "fp32"},
       {2, 1e-6,
        "fp32 storage and arithmetic: 2x a plain fp32 softmax (FlashAttention's test rule), "
        "floor ~8 fp32 ulps at 1.0 for inputs where the plain one happens to be exact"}},
      {{Quantity::probability, "bf16"},
       {2, 0x1p-8,
        "bf16 storage, fp32 arithmetic: the output's rounding to bf16 dominates (half an ulp, "
        "2^-8 relative); 2x a plain bf16 softmax, floor half a bf16 ulp at 1.0"}},
      {{Quantity::probability, "fp16"},
       {2, 0x1p-11,
        "fp16 storage, fp32 arithmetic: output rounding dominates (2^-11 relative); 2x a plain "
        "fp16 softmax, floor half an fp16 ulp at 1.0"}},
      {{Quantity::lse, "fp64"},
       {0, 1e-12,
        "fp64 LSE: m + log(l) with l summed in another order; rounding noise ~1e-15 relative"}},
      {{Quantity::lse, "fp32"},
       {2, 1e-5,
        "LSE is kept in fp32: 2x a plain fp32 LSE, floor 1e-5 relative for sums of up to 1e5 "
        "terms whose order differs (sqrt(n) * 6e-8 ~ 2e-5 worst seen on long rows)"}},
      {{Quantity::lse, "bf16"},
       {2, 1e-5, "bf16 inputs, LSE in fp32: as fp32 (the inputs are exact in fp32)"}},
      {{Quantity::lse, "fp16"},
       {2, 1e-5, "fp16 inputs, LSE in fp32: as fp32 (the inputs are exact in fp32)"}},
      {{Quantity::output, "fp64"},
       {0, 1e-12,
        "fp64 O: blockwise and one-shot differ by reduction order only, ~1e-15 measured at "
        "N = 4096; 1e-12 (times max |O|) leaves headroom and catches every rescaling bug"}},
      {{Quantity::output, "fp32"},
       {2, 1e-6,
        "fp32 O: 2x the plain fp32 attention (S, P, O in fp32) on the same inputs, floor ~8 ulps"}},
      {{Quantity::output, "bf16"},
       {2, 0x1p-8,
        "bf16 O, fp32 arithmetic: 2x the plain bf16 attention (S, P, O rounded to bf16, as "
        "PyTorch's math path), floor half a bf16 ulp times max |O|"}},
      {{Quantity::output, "fp16"},
       {2, 0x1p-11,
        "fp16 O, fp32 arithmetic: 2x the plain fp16 attention, floor half an fp16 ulp times "
        "max |O|"}},
  };
  return t;
}

// The tight per-element bands for the 16-bit dtypes (see ElementBand in tolerances.hpp).
const std::map<std::pair<Quantity, std::string>, ElementBand>& element_table() {
  static const std::map<std::pair<Quantity, std::string>, ElementBand> t = {
      {{Quantity::probability, "bf16"},
       {0x1p-8, 0, 2, 0x1p-134,
        "bf16 probability, fp32 exp(x - m) / l rounded once: round-to-nearest errs by at most "
        "u = 2^-8 relative, per element (the solution's worst element reaches 1.00 of this "
        "band); rounding exp or l to bf16 before the division adds two more such errors"}},
      {{Quantity::probability, "fp16"},
       {0x1p-11, 0, 2, 0x1p-25,
        "fp16 probability, fp32 exp(x - m) / l rounded once: at most u = 2^-11 relative per "
        "element, floor half the smallest fp16 subnormal (2^-25) for probabilities below "
        "2^-14; rounding exp or l to fp16 before the division breaks it"}},
      {{Quantity::output, "bf16"},
       {0x1p-8, 0x1p-5, 2, 0,
        "bf16 O with fp32 S, P and O: one rounding of O, at most u = 2^-8 relative per element; "
        "elements far smaller than their row's largest (|O| < 2^-5 max_row |O|) are held to "
        "u 2^-5 max_row |O|, since their fp32 error is set by the row, not by themselves "
        "(the solution's worst element reaches 1.00 of this band); rounding the running O to "
        "bf16 after every tile, or before dividing by l, errs several u"}},
      {{Quantity::output, "fp16"},
       {0x1p-11, 0x1p-5, 2, 0x1p-25,
        "fp16 O with fp32 S, P and O: one rounding of O, at most u = 2^-11 relative per "
        "element, held to u 2^-5 max_row |O| for elements far smaller than their row's largest; "
        "floor half the smallest fp16 subnormal"}},
  };
  return t;
}

}  // namespace

const ElementBand* element_band_for(Quantity q, const std::string& dtype) {
  auto it = element_table().find({q, dtype});
  return it == element_table().end() ? nullptr : &it->second;
}

const char* to_string(Quantity q) {
  switch (q) {
    case Quantity::probability: return "probability";
    case Quantity::lse: return "lse";
    case Quantity::output: return "output";
  }
  return "?";
}

const Band& band_for(Quantity q, const std::string& dtype) {
  auto it = table().find({q, dtype});
  if (it == table().end())
    throw std::invalid_argument(std::string("no tolerance band for ") + to_string(q) + " in " +
                                dtype);
  return it->second;
}

Tolerance tolerance(Quantity q, const std::string& dtype, double plain_max_abs,
                    double ref_max_abs) {
  const Band& b = band_for(q, dtype);
  const double scale = std::max(1.0, ref_max_abs);
  const double limit = b.factor * plain_max_abs + b.floor * scale;
  char buf[256];
  std::snprintf(buf, sizeof buf, "band %.3e = %g x plain %s (%.3e) + %.3e x %.3g", limit, b.factor,
                dtype.c_str(), plain_max_abs, b.floor, scale);
  return {limit, std::string(buf) + " [" + dtype + " " + to_string(q) + ": " + b.reason + "]"};
}

}  // namespace grading
