// what: never returns
// expect: no points
// --- top
#include <atomic>
static std::atomic<int> spin{0};
// --- body
for (;;) spin.fetch_add(1);
