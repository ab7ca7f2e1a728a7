// The lab process's side of lab 9: the Hopper backward behind lab 7's GPU backward handlers
// (grader/lab7_backward/backward_handlers.hpp), run inside grader/gpu/device_run's harness, and
// the speed check's "time" request (gpu_lab::time_backward) and the deterministic mode's calls.
#include "backward_handlers.hpp"
#include "course/lab9_hopper_backward.hpp"

void isolation::register_handlers(Registry& r) {
  backward_handlers::add<&course::lab9::flash_attention_backward, &course::lab9::backward_workspace_bytes>(r);
  backward_handlers::add_deterministic<&course::lab9::flash_attention_backward,
                                       &course::lab9::backward_workspace_bytes>(r);
  backward_handlers::add_time<&course::lab9::flash_attention_backward, &course::lab9::backward_workspace_bytes>(r);
}
