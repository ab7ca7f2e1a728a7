// The lab process's side of lab 5: runs the student's kernel (any step of the staircase) on the
// inputs the grader sent, inside grader/gpu/device_run, and times the shipped version for the
// speed checks. The handlers are shared with lab 8 (grader/gpu/forward_handlers.hpp); see
// grader/isolation/worker.hpp.
#include "course/lab5_tensor_core.hpp"
#include "forward_handlers.hpp"

void isolation::register_handlers(Registry& r) {
  gpu_lab::add_forward_handlers<course::lab5::ForwardOptions, &course::lab5::flash_attention_forward>(r);
}
