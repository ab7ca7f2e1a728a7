// what: never reads a call: a static initializer sleeps forever, before the lab process's first read, so every request larger than a pipe holds (64 KiB) finds nobody reading it; a grader that wrote without a deadline would wait on it for good
// expect: no points
// message: timed out after 5 s
// --- top
#include <unistd.h>
static const int kNeverReady = [] {
  for (;;) pause();
  return 0;
}();
// --- body
(void)kNeverReady;
