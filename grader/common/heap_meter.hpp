// Measures the peak heap bytes a piece of code allocates, by standing in for malloc and free
// (glibc only). Lab 3 uses it to prove an attention implementation never holds an N x N (or
// N x all-keys) buffer: the peak must stay O(N d + block_q block_k), whatever the code says.
//
//   grading::HeapMeter meter;            // starts counting
//   auto out = attention_forward(...);   // the code under test
//   long peak = meter.peak_bytes();      // most bytes held at once since the meter started
#pragma once

namespace grading {

class HeapMeter {
 public:
  HeapMeter();
  ~HeapMeter();
  HeapMeter(const HeapMeter&) = delete;
  HeapMeter& operator=(const HeapMeter&) = delete;
  long peak_bytes() const;  // includes bytes still held (e.g. the returned outputs)
  static bool available();  // false where malloc could not be interposed
};

}  // namespace grading
