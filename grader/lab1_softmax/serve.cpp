// The lab process's side of lab 1's API: decode a call, run the lab's function, encode the
// result. Linked with the student's code (or a solution, planted bug or variant); see
// grader/isolation/worker.hpp. Inputs are decoded into guarded memory (guarded.hpp): reading
// past the end of one crashes the call.
#include "course/lab1_softmax.hpp"
#include "guarded.hpp"
#include "tensors.hpp"
#include "worker.hpp"

namespace {

using isolation::Packet;

template <class T>
void serve_dtype(isolation::Registry& r) {
  r.add(isolation::call_name<T>("softmax_rows"), [](Packet& args, Packet& out) {
    isolation::put_matrix<T>(out, course::lab1::softmax_rows<T>(isolation::InputMatrix<T>(args)));
  });
  r.add(isolation::call_name<T>("logsumexp_rows"), [](Packet& args, Packet& out) {
    isolation::put_vector(out, course::lab1::logsumexp_rows<T>(isolation::InputMatrix<T>(args)));
  });
}

}  // namespace

void isolation::register_handlers(Registry& r) {
  serve_dtype<double>(r);
  serve_dtype<float>(r);
  serve_dtype<course::bf16>(r);
  serve_dtype<course::fp16>(r);
}
