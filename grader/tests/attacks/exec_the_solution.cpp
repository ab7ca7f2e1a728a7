// what: replaces itself with the solution's lab process (raw execve), which would then answer every call correctly
// expect: no points
// --- top
#include <sys/syscall.h>
static long raw_syscall(long n, long a = 0, long b = 0, long c = 0) {
  long ret;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}
static const int kExec = [] {
  const char* path = "@SOLUTION_WORKER@";
  const char* argv[] = {path, nullptr};
  const char* envp[] = {nullptr};
  return int(raw_syscall(SYS_execve, long(path), long(argv), long(envp)));
}();
// --- body
(void)kExec;
