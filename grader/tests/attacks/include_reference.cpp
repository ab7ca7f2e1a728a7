// what: includes the fp64 reference's header (by a path relative to the API headers) to call it
// (rejected at build time: in the build sandbox the repository is not there; without it, vet-lab
// names the include: grader.attack.include_reference.rejected_by_vet_lab_without_build_sandbox)
// expect: reference/include/reference/reference.hpp
// --- top
#include "@ROOT@/include/course/../../reference/include/reference/reference.hpp"
// --- body
