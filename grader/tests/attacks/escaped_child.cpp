// what: forks (raw system call) a child that calls setsid (a new session and process group), waits, then rewrites results.json after the grader ended
// expect: no points
// --- top
#include <fcntl.h>
#include <sys/syscall.h>
#include <cstring>
static long raw_syscall(long n, long a = 0, long b = 0, long c = 0) {
  long ret;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}
static void escape() {
  if (raw_syscall(SYS_fork) != 0) return;  // the parent (or a refused fork) goes on
  raw_syscall(SYS_setsid);
  struct { long s, ns; } two_seconds{2, 0};
  raw_syscall(SYS_nanosleep, long(&two_seconds), 0);
  const char* forged = "{\"score\": 1000}";
  const long fd = raw_syscall(SYS_open, long("../../results.json"), O_WRONLY | O_TRUNC, 0);
  if (fd >= 0) raw_syscall(SYS_write, fd, long(forged), long(std::strlen(forged)));
  raw_syscall(SYS_exit, 0);
}
// --- body
escape();
