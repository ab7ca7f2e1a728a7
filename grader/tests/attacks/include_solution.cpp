// what: includes the instructors' solution by its absolute path instead of writing the lab
// expect: includes @ROOT@/solutions/lab1_softmax/softmax.cpp
// --- whole
#include "@ROOT@/solutions/lab1_softmax/softmax.cpp"
