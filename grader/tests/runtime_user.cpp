// Linked into a lab's program so that it cannot start without the stand-in runtime
// (runtime_stand_in.cpp), as a GPU lab's cannot without libcudart: the call keeps the library
// among the program's needs.
extern "C" int course_runtime_stand_in();

namespace {
const int runtime_loaded = course_runtime_stand_in();
}  // namespace
