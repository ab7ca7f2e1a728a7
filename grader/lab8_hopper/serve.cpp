// The lab process's side of lab 8: runs the student's kernel (any step of the staircase) on the
// inputs the grader sent, inside grader/gpu/device_run, and times the shipped version for the
// speed checks. The handlers are lab 5's (grader/gpu/forward_handlers.hpp); see
// grader/isolation/worker.hpp.
#include "course/lab8_hopper.hpp"
#include "forward_handlers.hpp"

void isolation::register_handlers(Registry& r) {
  gpu_lab::add_forward_handlers<course::lab8::ForwardOptions, &course::lab8::flash_attention_forward>(r);
}
