// The GPU labs' choices of kernel as C++ reads them from course/gpu_labs.def: lab 5's and lab 8's
// staircase steps (their `Version`) and lab 7's backward kernels (`BackwardKernel`), with
//   - every value in enum order and its name: kAllVersions and version_name beside each Version
//     (course/lab5_tensor_core.hpp, course/lab8_hopper.hpp), kAllKernels and kernel_name here;
//   - the int that stands for a choice wherever one crosses a boundary: on the grader's wire
//     (grader/gpu/gpu_wire.hpp, KernelCall::version) and from the PyTorch bridge
//     (python/course_attn): the value's position in gpu_labs.def, which is its enum value, or -1
//     for the lab's default (`best`, `automatic`). encode_choice and decode_choice are the two
//     directions, used by every sender and receiver;
//   - static_asserts that each enum lists gpu_labs.def's names in the same order and that its
//     `best` is the list's. (That an enum has no value the list lacks is checked by reading the
//     header's text: grader/gpu/tests/test_gpu_labs.cpp.)
// The enums themselves stay in the lab headers, with their comments, where students read them.
//
// Plain C++ (no torch, no device code, no grader): the graders, the lab processes, the benchmarks
// and the bridge's bindings include it.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "course/lab5_tensor_core.hpp"
#include "course/lab7_backward_gpu.hpp"
#include "course/lab8_hopper.hpp"

namespace course::lab7 {
// Every backward kernel, its name in C++ and the name course_attn.backward(kernel=...) takes.
inline constexpr BackwardKernel kAllKernels[] = {
#define COURSE_LAB7_KERNEL(name, python_name) BackwardKernel::name,
#include "course/gpu_labs.def"
};
inline constexpr const char* kKernelNames[] = {
#define COURSE_LAB7_KERNEL(name, python_name) #name,
#include "course/gpu_labs.def"
};
inline constexpr const char* kKernelPythonNames[] = {
#define COURSE_LAB7_KERNEL(name, python_name) python_name,
#include "course/gpu_labs.def"
};
constexpr const char* kernel_name(BackwardKernel k) { return kKernelNames[static_cast<int>(k)]; }
}  // namespace course::lab7

namespace course::gpu_labs {

// The int for "the lab's default" (Version::best, BackwardKernel::automatic).
inline constexpr int kDefaultChoice = -1;

// Each enum's values and names, found by the value's type (the templates below take any of them).
constexpr const auto& all_choices(lab5::Version) { return lab5::kAllVersions; }
constexpr const auto& all_choices(lab8::Version) { return lab8::kAllVersions; }
constexpr const auto& all_choices(lab7::BackwardKernel) { return lab7::kAllKernels; }
constexpr const auto& choice_names(lab5::Version) { return lab5::kVersionNames; }
constexpr const auto& choice_names(lab8::Version) { return lab8::kVersionNames; }
constexpr const auto& choice_names(lab7::BackwardKernel) { return lab7::kKernelNames; }

// True when all[i] has the value i for every i: the enum lists the names in gpu_labs.def's order
// (and then the int of a choice is both its position in the list and its enum value).
template <class Choice, std::size_t N>
constexpr bool in_list_order(const Choice (&all)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (static_cast<std::size_t>(all[i]) != i) return false;
  return true;
}

static_assert(in_list_order(lab5::kAllVersions),
              "course::lab5::Version and course/gpu_labs.def's COURSE_LAB5_VERSION lines differ in order");
static_assert(in_list_order(lab8::kAllVersions),
              "course::lab8::Version and course/gpu_labs.def's COURSE_LAB8_VERSION lines differ in order");
static_assert(in_list_order(lab7::kAllKernels),
              "course::lab7::BackwardKernel and course/gpu_labs.def's COURSE_LAB7_KERNEL lines differ in order");
#define COURSE_LAB5_BEST(name) \
  static_assert(lab5::Version::best == lab5::Version::name, "lab5::Version::best is not gpu_labs.def's COURSE_LAB5_BEST");
#define COURSE_LAB8_BEST(name) \
  static_assert(lab8::Version::best == lab8::Version::name, "lab8::Version::best is not gpu_labs.def's COURSE_LAB8_BEST");
#include "course/gpu_labs.def"

template <class Choice>
constexpr const char* choice_name(Choice c) {
  return choice_names(c)[static_cast<int>(c)];
}

// The int that stands for a choice (its position in gpu_labs.def).
template <class Choice>
constexpr int encode_choice(Choice c) {
  return static_cast<int>(c);
}

// The choice an int stands for: kDefaultChoice gives `fallback` (the lab's default); an int that
// stands for nothing is an error of the sender, std::invalid_argument naming `what`.
template <class Choice>
Choice decode_choice(int value, Choice fallback, std::string_view what) {
  const auto& all = all_choices(fallback);
  const int count = static_cast<int>(std::size(all));
  if (value == kDefaultChoice) return fallback;
  if (value < 0 || value >= count)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(value) + " stands for no choice (0 to " +
                                std::to_string(count - 1) + ", or -1 for the default)");
  return all[value];
}

// The choice of that name (as gpu_labs.def spells it), if there is one.
template <class Choice>
std::optional<Choice> choice_from_name(std::string_view name) {
  for (Choice c : all_choices(Choice{}))
    if (name == choice_name(c)) return c;
  return std::nullopt;
}

}  // namespace course::gpu_labs
