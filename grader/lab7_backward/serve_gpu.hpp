// Lab 7's GPU calls in the lab process (serve_gpu.cpp), registered by serve.cpp where CUDA was
// found (COURSE_LAB7_GPU).
#pragma once

#include "worker.hpp"

namespace lab7_gpu {
void register_handlers(isolation::Registry& r);
}
