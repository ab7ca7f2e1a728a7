// what: sends SIGKILL to its parent, the grader, and to every process it may signal (raw system calls)
// expect: no points
// --- top
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
static long raw_syscall(long n, long a = 0, long b = 0) {
  long ret;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b) : "rcx", "r11", "memory");
  return ret;
}
// --- body
raw_syscall(SYS_kill, getppid(), SIGKILL); raw_syscall(SYS_kill, -1, SIGKILL);
