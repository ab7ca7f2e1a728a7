// The lab process's side of lab 2's API; see grader/isolation/worker.hpp. Inputs are decoded
// into guarded memory (guarded.hpp): reading past the end of a block or matrix crashes the call.
#include "course/lab2_combine.hpp"
#include "guarded.hpp"
#include "tensors.hpp"
#include "worker.hpp"

namespace {

using course::lab2::BlockStats;
using isolation::Packet;

template <class Acc>
BlockStats<Acc> get_stats(Packet& p) {
  const Acc m = p.get<Acc>();
  return {m, p.get<Acc>()};
}
template <class Acc>
void put_stats(Packet& p, BlockStats<Acc> s) {
  p.put(s.m);
  p.put(s.l);
}

template <class Acc>
void serve_stats(isolation::Registry& r, const std::string& acc) {
  r.add("empty_stats/" + acc, [](Packet&, Packet& out) { put_stats(out, course::lab2::empty_stats<Acc>()); });
  r.add("combine/" + acc, [](Packet& args, Packet& out) {
    const auto a = get_stats<Acc>(args);
    const auto b = get_stats<Acc>(args);
    put_stats(out, course::lab2::combine(a, b));
  });
  r.add("lse_of/" + acc, [](Packet& args, Packet& out) { out.put(course::lab2::lse_of(get_stats<Acc>(args))); });
}

// softmax_streaming<T, Acc> as the call `name`. With Acc = CountedFloat the exponentials it
// computes go back with the reply (worker_main.cpp reports CountedFloat's counters).
template <class T, class Acc>
void serve_streaming(isolation::Registry& r, const std::string& name) {
  r.add(isolation::call_name<T>(name), [](Packet& args, Packet& out) {
    const isolation::InputMatrix<T> x(args);
    const auto block = args.get<std::int64_t>();
    const auto result = course::lab2::softmax_streaming<T, Acc>(x, int(block));
    isolation::put_matrix<T>(out, result.y);
    isolation::put_vector(out, result.lse);
  });
}

template <class T>
void serve_dtype(isolation::Registry& r) {
  r.add(isolation::call_name<T>("block_stats"), [](Packet& args, Packet& out) {
    // The block's n scores end at a guard page; an empty block is a pointer to the guard page.
    const auto n = args.get<std::int64_t>();
    const isolation::InputArray<T> x(args, std::size_t(n < 0 ? 0 : n));
    put_stats(out, course::lab2::block_stats<T>(x.data(), int(n)));
  });
  serve_streaming<T, course::accum_t<T>>(r, "softmax_streaming");
}

}  // namespace

void isolation::register_handlers(Registry& r) {
  serve_stats<double>(r, "fp64");
  serve_stats<float>(r, "fp32");
  serve_dtype<double>(r);
  serve_dtype<float>(r);
  serve_dtype<course::bf16>(r);
  serve_dtype<course::fp16>(r);
  serve_streaming<float, course::CountedFloat>(r, "softmax_streaming_counted");
}
