// The lab process's side of lab 7's API; see grader/isolation/worker.hpp. Calls are dispatched by
// name ("attention_backward/fp32", ...): part 2 (the GPU kernel) adds its own names here.
//
// Part 1, attention_backward on the CPU: every input (Q, K, V, O, dO and lse) is decoded into
// guarded memory (guarded.hpp), so reading past the end of any of them crashes the call; the call
// runs under the heap meter, which counts the bytes the lab's code allocates during it (the
// outputs included) and reports the peak with the reply as the counter "peak_heap_bytes".
#include "course/lab7_backward.hpp"
#include "guarded.hpp"
#include "heap_meter.hpp"
#include "tensors.hpp"
#include "tile_options.hpp"
#include "worker.hpp"
#if COURSE_LAB7_GPU
#include "serve_gpu.hpp"  // part 2, where CUDA was found
#endif

namespace {

using isolation::Packet;

// attention_backward<T, Acc> as the call `name`. With Acc = CountedFloat the multiplications and
// exponentials it counted go back with the reply (worker_main.cpp reports CountedFloat's counters).
template <class T, class Acc>
void serve_backward(isolation::Registry& r, const std::string& name) {
  r.add(isolation::call_name<T>(name), [](Packet& args, Packet& out) {
    const isolation::InputMatrix<T> Q(args), K(args), V(args), O(args), dO(args);
    const isolation::InputVector<course::accum_t<T>> lse(args);
    const auto options = isolation::get_tile_options<course::lab7::BackwardOptions>(args);
    grading::HeapMeter meter;
    const auto grads = course::lab7::attention_backward<T, Acc>(Q, K, V, O, dO, lse, options);
    isolation::report_counter("peak_heap_bytes", std::uint64_t(meter.peak_bytes()));
    isolation::put_matrix<T>(out, grads.dQ);
    isolation::put_matrix<T>(out, grads.dK);
    isolation::put_matrix<T>(out, grads.dV);
  });
}

}  // namespace

void isolation::register_handlers(Registry& r) {
  serve_backward<double, double>(r, "attention_backward");
  serve_backward<float, float>(r, "attention_backward");
  serve_backward<course::bf16, float>(r, "attention_backward");
  serve_backward<course::fp16, float>(r, "attention_backward");
  serve_backward<float, course::CountedFloat>(r, "attention_backward_counted");
  r.add("heap_meter.available", [](Packet&, Packet& out) {
    out.put<std::uint8_t>(grading::HeapMeter::available());
  });
#if COURSE_LAB7_GPU
  lab7_gpu::register_handlers(r);
#endif
}
