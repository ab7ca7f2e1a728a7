// what: defines the C library's write() so that the lab process's replies could be forged at link time
// expect: rejected by the grader's checks of lab code
// --- top
#include <unistd.h>
extern "C" ssize_t write(int, const void*, size_t n) { return ssize_t(n); }
// --- body
