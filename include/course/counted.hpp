// CountedFloat: a float that counts its multiplications and exponentials.
//
// Lab 3's grader instantiates the student's attention with Acc = CountedFloat to measure how
// much arithmetic the code really did (e.g. that causal masking skips about half the tiles, and
// that keys are streamed in tiles of block_k: each tile rescales a row's running statistics,
// which costs one exponential). Lab 7's grader does the same with the backward pass (one
// exponential per score: P recomputed once, from the saved LSE). Each product of two accumulator
// values, and each course::exp / course::exp2 of one, adds one to a per-thread counter; it is a
// float in every other respect. The counts are what this type saw, in the lab process: work done
// in another type, on a thread the grader does not read, or only when Acc is CountedFloat, is not
// counted (the README's threat model says what that leaves open).
#pragma once

#include <cmath>
#include <cstdint>

namespace course {

class CountedFloat {
 public:
  CountedFloat() = default;
  CountedFloat(float v) : v_(v) {}  // NOLINT: implicit on purpose, like a float literal
  explicit operator float() const { return v_; }
  explicit operator double() const { return v_; }
  float value() const { return v_; }

  // Multiplications performed on this thread since the last reset.
  static std::uint64_t& multiplications() {
    thread_local std::uint64_t count = 0;
    return count;
  }

  // Exponentials (course::exp and course::exp2 of a CountedFloat) on this thread since the last
  // reset: one per probability, plus one per rescaling of a row's running statistics.
  static std::uint64_t& exponentials() {
    thread_local std::uint64_t count = 0;
    return count;
  }
  friend CountedFloat operator*(CountedFloat a, CountedFloat b) {
    ++multiplications();
    return a.v_ * b.v_;
  }
  friend CountedFloat operator/(CountedFloat a, CountedFloat b) { return a.v_ / b.v_; }
  friend CountedFloat operator+(CountedFloat a, CountedFloat b) { return a.v_ + b.v_; }
  friend CountedFloat operator-(CountedFloat a, CountedFloat b) { return a.v_ - b.v_; }
  friend CountedFloat operator-(CountedFloat a) { return -a.v_; }
  CountedFloat& operator+=(CountedFloat b) { return *this = *this + b; }
  CountedFloat& operator-=(CountedFloat b) { return *this = *this - b; }
  CountedFloat& operator*=(CountedFloat b) { return *this = *this * b; }
  CountedFloat& operator/=(CountedFloat b) { return *this = *this / b; }
  friend bool operator<(CountedFloat a, CountedFloat b) { return a.v_ < b.v_; }
  friend bool operator>(CountedFloat a, CountedFloat b) { return a.v_ > b.v_; }
  friend bool operator<=(CountedFloat a, CountedFloat b) { return a.v_ <= b.v_; }
  friend bool operator>=(CountedFloat a, CountedFloat b) { return a.v_ >= b.v_; }
  friend bool operator==(CountedFloat a, CountedFloat b) { return a.v_ == b.v_; }
  friend bool operator!=(CountedFloat a, CountedFloat b) { return a.v_ != b.v_; }

 private:
  float v_ = 0.0f;
};

}  // namespace course
