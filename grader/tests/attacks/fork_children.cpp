// what: forks a few children with the C library's fork()
// expect: calls fork()
// --- top
#include <unistd.h>
// --- body
for (int i = 0; i < 4; ++i) if (fork() == 0) for (;;) {}
