// The lab process's side of lab 7, parts 2 and 3 (the GPU kernels): flash_attention_backward
// behind the handlers of backward_handlers.hpp (shared with lab 9). Called by serve.cpp's
// register_handlers where CUDA was found.
#include "backward_handlers.hpp"
#include "course/lab7_backward_gpu.hpp"
#include "serve_gpu.hpp"

void lab7_gpu::register_handlers(isolation::Registry& r) {
  backward_handlers::add<&course::lab7::flash_attention_backward, &course::lab7::backward_workspace_bytes>(r);
}
