// what: starts threads that sleep forever until the system refuses one (at most 4000, so that a run without the limit harms no machine), then names how many it started: without a limit, a lab process could take every PID of the machine, and every neighbour's build and lab process would then fail to start
// expect: no points
// message: the lab process could start no more than
// --- top
#include <pthread.h>
#include <unistd.h>
#include <stdexcept>
#include <string>
static void* sleep_forever(void*) {
  for (;;) pause();
}
static int start_sleeping_threads(int most) {
  pthread_attr_t small_stack;
  pthread_attr_init(&small_stack);
  pthread_attr_setstacksize(&small_stack, 64 << 10);
  int started = 0;
  for (pthread_t t; started < most && pthread_create(&t, &small_stack, sleep_forever, nullptr) == 0;) ++started;
  return started;
}
// --- body
const int started = start_sleeping_threads(4000);
if (started < 4000) throw std::runtime_error("the lab process could start no more than " + std::to_string(started) + " threads");
throw std::runtime_error("the lab process started 4000 threads: no limit held");
