// what: never returns
// expect: 0/20
// --- top
#include <atomic>
static std::atomic<int> spin{0};
// --- body
for (;;) spin.fetch_add(1);
