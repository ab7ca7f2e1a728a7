// Races and invalid accesses, found by NVIDIA's compute-sanitizer instead of by luck. A missing
// __syncthreads() is a race that may never change a result on the GPU it is graded on (the
// warps happen to run in an order that hides it), and a read past the end of a buffer may land
// in memory that holds harmless values; both pass checks that only compare outputs, and both
// break on another GPU, another driver, or another shape. compute-sanitizer instruments every
// shared- and global-memory access of the lab's kernels and reports:
//   racecheck  two threads of a block touching the same shared-memory word, at least one of them
//              writing, with no barrier between them (a missing or misplaced __syncthreads);
//   synccheck  barriers used wrongly (a __syncthreads that not every thread of the block
//              reaches, a __syncwarp with a wrong mask);
//   memcheck   reads and writes out of bounds or misaligned, in global and shared memory.
// It slows kernels by 10-100x, so the checks that use it run a few small shapes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "grading.hpp"

namespace gpu_grading {

// compute-sanitizer's path: COURSE_COMPUTE_SANITIZER, else the CUDA toolkit's bin/ folder that
// the course was built with, else /usr/local/cuda/bin, else PATH; "" when there is none.
std::string find_compute_sanitizer();

// Runs `calls` (the lab's calls on a few small problems, each compared with the reference as
// usual) once in a lab process under each tool of `tools` in turn, in the same sandbox as
// always. Fails the current check with the tool's first reports (kernel, source line, the two
// accesses) when one finds anything; skips the check, saying why, where compute-sanitizer is not
// installed. `about` names the calls in messages.
void check_under_compute_sanitizer(const grading::Case& about, const std::function<void()>& calls,
                                   const std::vector<std::string>& tools = {"racecheck", "synccheck",
                                                                            "memcheck"});

}  // namespace gpu_grading
