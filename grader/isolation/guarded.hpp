// Input tensors of the lab process, placed so that reading past their end crashes the call.
//
// Why: a lab that reads beyond an input (one K/V tile too many, row Nk of V) reads whatever
// the heap holds there. In Release that is silent: the garbage is often 0, or multiplied by a
// weight of 0, and every number comes out right. So the lab process puts each input it decodes
// from the wire at the end of an mmap'd region whose next page is PROT_NONE (a guard page; one
// also precedes the region): the first read past the end is a SIGSEGV, which the grader reports
// as a crash of that call, in every build. (AddressSanitizer builds catch it too; mmap'd memory
// is fine there.)
//
// The data end exactly at the guard page when their size is a multiple of the alignment the
// pointer must keep: alignof(T) for a raw array, and for a course::Matrix the 16 bytes (or
// EIGEN_MAX_ALIGN_BYTES) that malloc gives and Eigen's vectorised code relies on. Otherwise up
// to that many bytes minus one lie between the end and the guard page.
//
// Used by the lab process only (grader/labN_*/serve.cpp), never by the grader.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "course/cpu.hpp"
#include "wire.hpp"

namespace isolation {

// `bytes` of read-write memory ending (up to `align`) at a PROT_NONE page, with another
// PROT_NONE page before the region. Throws std::bad_alloc if the memory cannot be mapped.
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  GuardedBuffer(std::size_t bytes, std::size_t align);
  ~GuardedBuffer();
  GuardedBuffer(GuardedBuffer&& other) noexcept;
  GuardedBuffer& operator=(GuardedBuffer&& other) noexcept;
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  // The data; for 0 bytes, the first byte of the guard page (reading it crashes).
  void* data() const { return data_; }

 private:
  void* region_ = nullptr;
  std::size_t region_bytes_ = 0;
  void* data_ = nullptr;
};

// n elements of T from the wire (their bytes), in a GuardedBuffer.
template <class T>
class InputArray {
 public:
  InputArray(Packet& p, std::size_t n) {
    if (n > p.remaining() / sizeof(T))
      throw Malformed("an array of " + std::to_string(n) + " elements exceeds the data that follows");
    buffer_ = GuardedBuffer(sizeof(T) * n, alignof(T));
    p.get_bytes(buffer_.data(), sizeof(T) * n);
    size_ = n;
  }
  const T* data() const { return static_cast<const T*>(buffer_.data()); }
  std::size_t size() const { return size_; }

 private:
  GuardedBuffer buffer_;
  std::size_t size_ = 0;
};

namespace detail {
// Eigen's storage of a dynamic matrix: its data pointer, then rows and cols (DenseStorage).
struct MatrixStorage {
  void* data;
  Eigen::Index rows;
  Eigen::Index cols;
};
// ... and of a dynamic column vector: its data pointer, then rows.
struct VectorStorage {
  void* data;
  Eigen::Index rows;
};

// Whether course::Matrix<T> is laid out as MatrixStorage (checked once on a real matrix); if
// not (another Eigen), InputMatrix allocates as usual, without the guard.
template <class T>
bool matrix_storage_known() {
  static const bool known = [] {
    if constexpr (sizeof(course::Matrix<T>) != sizeof(MatrixStorage)) {
      return false;
    } else {
      const course::Matrix<T> probe(3, 5);
      MatrixStorage s;
      std::memcpy(&s, static_cast<const void*>(&probe), sizeof s);
      return s.data == probe.data() && s.rows == 3 && s.cols == 5;
    }
  }();
  return known;
}
template <class T>
bool vector_storage_known() {
  static const bool known = [] {
    if constexpr (sizeof(course::Vector<T>) != sizeof(VectorStorage)) {
      return false;
    } else {
      const course::Vector<T> probe(7);
      VectorStorage s;
      std::memcpy(&s, static_cast<const void*>(&probe), sizeof s);
      return s.data == probe.data() && s.rows == 7;
    }
  }();
  return known;
}
}  // namespace detail

// A course::Matrix<T> from the wire (rows, cols, then the elements, as put_matrix writes them)
// whose elements lie in a GuardedBuffer; pass it wherever the API takes const Matrix<T>&.
// The lab's API takes a real Eigen matrix, and Eigen has no allocator hook: the matrix is
// constructed empty and its storage pointed at the buffer, and pointed back at nothing before
// it is destroyed, so Eigen never frees memory it did not allocate. Not copyable or movable.
template <class T>
class InputMatrix {
 public:
  explicit InputMatrix(Packet& p) {
    const auto rows = p.get<std::int64_t>(), cols = p.get<std::int64_t>();
    if (rows < 0 || cols < 0 || (cols > 0 && std::uint64_t(rows) > p.remaining() / sizeof(T) / std::uint64_t(cols)))
      throw Malformed("a matrix of shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
                      "] does not fit the data that follows");
    const std::size_t bytes = sizeof(T) * std::size_t(rows * cols);
    if (bytes > 0 && detail::matrix_storage_known<T>()) {
      const std::size_t align = std::max<std::size_t>({16, std::size_t(EIGEN_MAX_ALIGN_BYTES), alignof(T)});
      buffer_ = GuardedBuffer(bytes, align);
      new (&matrix_) course::Matrix<T>();
      point_storage(buffer_.data(), rows, cols);
      guarded_ = true;
    } else {
      new (&matrix_) course::Matrix<T>(rows, cols);
    }
    p.get_bytes(matrix_.data(), bytes);
  }
  ~InputMatrix() {
    if (guarded_) point_storage(nullptr, 0, 0);
    matrix_.~Matrix();
  }
  InputMatrix(const InputMatrix&) = delete;
  InputMatrix& operator=(const InputMatrix&) = delete;

  const course::Matrix<T>& matrix() const { return matrix_; }
  operator const course::Matrix<T>&() const { return matrix_; }  // NOLINT: used as the matrix

 private:
  void point_storage(void* data, Eigen::Index rows, Eigen::Index cols) {
    const detail::MatrixStorage s{data, rows, cols};
    std::memcpy(static_cast<void*>(&matrix_), &s, sizeof s);
  }

  GuardedBuffer buffer_;
  bool guarded_ = false;
  union {
    course::Matrix<T> matrix_;  // constructed and destroyed by hand (above)
  };
};

// A course::Vector<T> from the wire (its length, then the elements, as put_vector writes them)
// whose elements lie in a GuardedBuffer; InputMatrix's scheme for a column vector (lab 7's lse).
template <class T>
class InputVector {
 public:
  explicit InputVector(Packet& p) {
    const std::size_t n = p.get_count(sizeof(T));
    const std::size_t bytes = sizeof(T) * n;
    if (bytes > 0 && detail::vector_storage_known<T>()) {
      const std::size_t align =
          std::max<std::size_t>({16, std::size_t(EIGEN_MAX_ALIGN_BYTES), alignof(T)});
      buffer_ = GuardedBuffer(bytes, align);
      new (&vector_) course::Vector<T>();
      point_storage(buffer_.data(), Eigen::Index(n));
      guarded_ = true;
    } else {
      new (&vector_) course::Vector<T>(Eigen::Index(n));
    }
    p.get_bytes(vector_.data(), bytes);
  }
  ~InputVector() {
    if (guarded_) point_storage(nullptr, 0);
    vector_.~Matrix();
  }
  InputVector(const InputVector&) = delete;
  InputVector& operator=(const InputVector&) = delete;

  operator const course::Vector<T>&() const { return vector_; }  // NOLINT: used as the vector

 private:
  void point_storage(void* data, Eigen::Index rows) {
    const detail::VectorStorage s{data, rows};
    std::memcpy(static_cast<void*>(&vector_), &s, sizeof s);
  }

  GuardedBuffer buffer_;
  bool guarded_ = false;
  union {
    course::Vector<T> vector_;  // constructed and destroyed by hand (above)
  };
};

}  // namespace isolation
