// Lab 9 API (beyond): the attention backward pass on Hopper (sm_90a) -- wgmma for all five
// products, TMA and mbarrier for the tiles. The same call as lab 7's GPU backward
// (course/lab7_backward_gpu.hpp): same arguments, same options, same results; the workspace is
// lab 7's plus the turn counters of the deterministic mode (below). What differs is listed here.
//
// Implemented by labs/lab9_hopper_backward/ (you) and solutions/lab9_hopper_backward/.
// Plain C++ header (no device code): graders and benchmarks compiled by the host compiler call it.
#pragma once

#include <cstddef>

#include "course/gpu.hpp"                 // DType, AttentionShape
#include "course/lab7_backward_gpu.hpp"  // BackwardGpuOptions: the description of a call

namespace course::lab9 {

// Lab 7's options. `kernel` must be automatic or tensor_cores: the Hopper backward runs on
// tensor cores only (cuda_cores is rejected with course::BadInput). `hopper_step` and
// `deterministic` are this lab's: the step of its staircase (lab7::HopperBackwardStep: wgmma, or
// warp_specialized, the default `best`; any other value is course::BadInput), and dQ added by
// the K/V tiles in a fixed order, so that dQ, like dK and dV, is the same bit for bit in every
// run, whatever else runs on the GPU.
using BackwardGpuOptions = course::lab7::BackwardGpuOptions;

// Workspace bytes flash_attention_backward needs: lab 7's B * H * Nq * (d + 1) floats (the fp32
// dQ accumulator, then D), then B * H * ceil(Nq / 64) ints (the deterministic mode's turn
// counters; every call zeroes them on its stream).
std::size_t backward_workspace_bytes(const AttentionShape& shape);

// lab7::flash_attention_backward's contract (course/lab7_backward_gpu.hpp), with these
// differences: dtype bf16 or fp16 (P and dS rounded to it as the tensor cores' operands, as lab
// 7's tensor-core kernel does), d = 64 or 128, and a GPU of compute capability 9.0 (H100/H200);
// any other GPU gets course::BadInput. The checks are course::check_backward's with kLab9Rules
// (course/attention.hpp).
void flash_attention_backward(const void* Q, const void* K, const void* V, const void* O,
                              const void* dO, const float* lse, void* dQ, void* dK, void* dV,
                              DType dtype, const AttentionShape& shape,
                              const BackwardGpuOptions& options);

}  // namespace course::lab9
