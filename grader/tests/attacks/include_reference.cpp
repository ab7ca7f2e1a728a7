// what: includes the fp64 reference's header (by a path relative to the API headers) to call it
// expect: includes @ROOT@/reference/include/reference/reference.hpp
// --- top
#include "@ROOT@/include/course/../../reference/include/reference/reference.hpp"
// --- body
