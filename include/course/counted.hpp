// CountedFloat: a float that counts its multiplications.
//
// Lab 3's grader instantiates the student's attention with Acc = CountedFloat to measure how
// much arithmetic the code really did (e.g. that causal masking skips about half the tiles).
// The count cannot be faked without doing the work: each product of two accumulator values
// adds one to a per-thread counter. It is a float in every other respect.
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
