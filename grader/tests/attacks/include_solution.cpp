// what: includes the instructors' solution by its absolute path instead of writing the lab
// (rejected at build time: in the build sandbox the file is not there; without it, vet-lab names
// the include; the test grader.attack.include_solution.rejected_by_vet_lab_without_build_sandbox)
// expect: @ROOT@/solutions/lab1_softmax/softmax.cpp
// --- whole
#include "@ROOT@/solutions/lab1_softmax/softmax.cpp"
