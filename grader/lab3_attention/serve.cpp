// The lab process's side of lab 3's API; see grader/isolation/worker.hpp. Every attention call
// runs under the heap meter, which counts the bytes the lab's code allocates during the call
// (the outputs included, the inputs the server decoded before it not), and reports the peak
// with the reply as the counter "peak_heap_bytes". The inputs of attention_forward are decoded
// into guarded memory (guarded.hpp): reading past the end of Q, K or V crashes the call.

#include "course/lab3_attention.hpp"
#include "guarded.hpp"
#include "heap_meter.hpp"
#include "tensors.hpp"
#include "wire_lab3.hpp"
#include "worker.hpp"

namespace {

using isolation::Packet;

template <class T, class Acc>
void serve_forward(isolation::Registry& r, const std::string& name) {
  r.add(isolation::call_name<T>(name), [](Packet& args, Packet& out) {
    const isolation::InputMatrix<T> Q(args), K(args), V(args);
    const auto options = isolation::get_tile_options<course::lab3::AttentionOptions>(args);
    grading::HeapMeter meter;
    const auto result = course::lab3::attention_forward<T, Acc>(Q, K, V, options);
    isolation::report_counter("peak_heap_bytes", std::uint64_t(meter.peak_bytes()));
    isolation::put_matrix<T>(out, result.O);
    isolation::put_vector(out, result.lse);
  });
}

template <class T>
void serve_dtype(isolation::Registry& r) {
  serve_forward<T, course::accum_t<T>>(r, "attention_forward");
  r.add(isolation::call_name<T>("attention_forward_batched"), [](Packet& args, Packet& out) {
    const auto Q = isolation::get_tensor4<T>(args);
    const auto K = isolation::get_tensor4<T>(args);
    const auto V = isolation::get_tensor4<T>(args);
    const auto options = isolation::get_tile_options<course::lab3::AttentionOptions>(args);
    grading::HeapMeter meter;
    const auto result = course::lab3::attention_forward_batched<T>(Q, K, V, options);
    isolation::report_counter("peak_heap_bytes", std::uint64_t(meter.peak_bytes()));
    isolation::put_tensor4(out, result.O);
    isolation::put_values(out, result.lse);
  });
}

}  // namespace

void isolation::register_handlers(Registry& r) {
  serve_dtype<double>(r);
  serve_dtype<float>(r);
  serve_dtype<course::bf16>(r);
  serve_dtype<course::fp16>(r);
  serve_forward<float, course::CountedFloat>(r, "attention_forward_counted");
  r.add("heap_meter.available", [](Packet&, Packet& out) {
    out.put<std::uint8_t>(grading::HeapMeter::available());
  });
}
