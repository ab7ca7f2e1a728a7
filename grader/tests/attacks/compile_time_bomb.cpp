// what: includes /dev/zero, which the compiler reads forever
// expect: build failed
// --- whole
#include "/dev/zero"
