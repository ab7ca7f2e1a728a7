// what: calls exit(0) from a static initializer, before any check can run
// expect: no points
// --- top
#include <cstdlib>
static const int kExitAtOnce = (std::exit(0), 0);
// --- body
(void)kExitAtOnce;
