// The two exceptions every lab shares. Eigen-free so that CUDA host code can use it too.
#pragma once

#include <stdexcept>
#include <string>

namespace course {

// Thrown by every skeleton function until the student writes it. The grader prints the
// message as-is, so it names the function and the file to edit.
struct NotImplemented : std::logic_error {
  NotImplemented(const std::string& function, const std::string& file)
      : std::logic_error("not implemented: " + function + " in " + file) {}
};

// Thrown for input that the API does not accept: shapes that do not match, an unsupported
// head dimension, NaN where a finite value is required. The message says which argument
// and why, so that a caller never has to read a stack trace.
struct BadInput : std::invalid_argument {
  explicit BadInput(const std::string& what) : std::invalid_argument(what) {}
};

}  // namespace course
