// The system-call filter of a lab process (seccomp_filter.hpp), CPU and GPU rules, call by call:
// a child process installs it and tries what a hostile lab would (each must fail with EPERM) and
// what a lab needs (each must work). The parent reports. With COURSE_FILTER_TEST=unfiltered the
// children install nothing, with =unfiltered-gpu the GPU rules' child alone: the test must then
// fail, which shows that its checks can.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "seccomp_filter.hpp"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}
// A call the filter must refuse: it returns -1 with errno EPERM.
void refused(long result, const char* what) {
  expect(result == -1 && errno == EPERM, std::string("refused: ") + what);
}
void allowed(long result, const char* what) { expect(result != -1, std::string("allowed: ") + what); }

void* thread_body(void*) { return nullptr; }

int run_checks(pid_t parent, int scratch_fd) {
  // What a lab needs.
  allowed(open("/proc/self/status", O_RDONLY), "open for reading");
  allowed(fcntl(1, F_GETFL), "fcntl F_GETFL");
  rlimit old{};
  allowed(prlimit(0, RLIMIT_AS, nullptr, &old), "prlimit reading its own limit");
  allowed(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl PR_SET_DUMPABLE 0");
  allowed(kill(getpid(), 0), "kill of itself");
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  allowed(sched_getaffinity(0, sizeof cpus, &cpus), "sched_getaffinity");
  allowed(sched_setaffinity(0, sizeof cpus, &cpus), "sched_setaffinity of itself");
  pthread_t t;
  expect(pthread_create(&t, nullptr, thread_body, nullptr) == 0 && pthread_join(t, nullptr) == 0, "allowed: a thread");
  // What a hostile lab would try.
  const long forked = syscall(SYS_fork);
  if (forked == 0) _exit(0);  // unfiltered, the new process leaves at once
  refused(forked, "fork");
  refused(syscall(SYS_execveat, 0, "", nullptr, nullptr, AT_EMPTY_PATH), "execveat through another descriptor");
  refused(syscall(SYS_execve, "/nonexistent/program", nullptr, nullptr), "execve");
  // The one exec the filter allows goes through kExecFd, which a lab process cannot make: its
  // limit on open files is below it (the grader sets it; so does this child, before the filter).
  expect(dup2(0, isolation::kExecFd) == -1 && errno == EBADF, "a descriptor as high as kExecFd cannot be made");
  refused(open("/tmp/course-filter-test", O_WRONLY | O_CREAT, 0600), "open for writing");
  refused(kill(parent, 0), "kill of another process");
  refused(fcntl(1, F_SETOWN, parent), "fcntl F_SETOWN (signals on I/O to another process)");
  refused(fcntl(1, F_SETSIG, SIGKILL), "fcntl F_SETSIG");
  // (Each of these is harmless where it is not refused: it touches only the test's own parent.)
  const rlimit no_core{0, 0};
  refused(prlimit(parent, RLIMIT_CORE, &no_core, nullptr), "prlimit setting another process's limit");
  refused(prlimit(0, RLIMIT_CPU, &old, nullptr), "prlimit setting its own limit");
  refused(setrlimit(RLIMIT_AS, &old), "setrlimit");
  refused(setpriority(PRIO_PROCESS, parent, 1), "setpriority of another process (PRIO_USER would reach every process of its user)");
  refused(sched_setaffinity(parent, sizeof cpus, &cpus), "sched_setaffinity of another process");
  refused(shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600), "SysV shmget");
  refused(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl PR_SET_DUMPABLE 1");
  refused(syscall(SYS_process_vm_readv, parent, nullptr, 0, nullptr, 0, 0), "process_vm_readv");
  // A file's mode, owner or attributes changed through a descriptor opened to read (the test's own
  // scratch file), and a POSIX message queue (a name that does not exist: unfiltered, ENOENT).
  refused(fchmod(scratch_fd, 0), "fchmod");
  refused(fchown(scratch_fd, 0, 0), "fchown");
  refused(fsetxattr(scratch_fd, "user.course", "x", 1, 0), "fsetxattr");
  refused(syscall(SYS_mq_open, "course-filter-test-none", O_RDONLY, 0, nullptr), "mq_open");
  return failures;
}

// The GPU labs' rules (FilterRules::gpu) are looser, for the CUDA driver: files may be written.
// What they still refuse: new processes, signals to others, and SysV IPC, whose shared memory no
// limit of the process counts.
int run_gpu_checks(pid_t parent, const char* scratch_path) {
  allowed(open(scratch_path, O_WRONLY), "GPU rules: open for writing");
  pthread_t t;
  expect(pthread_create(&t, nullptr, thread_body, nullptr) == 0 && pthread_join(t, nullptr) == 0,
         "allowed: GPU rules: a thread");
  const long forked = syscall(SYS_fork);
  if (forked == 0) _exit(0);
  refused(forked, "GPU rules: fork");
  refused(kill(parent, 0), "GPU rules: kill of another process");
  refused(shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600), "GPU rules: SysV shmget");
  refused(syscall(SYS_msgget, IPC_PRIVATE, IPC_CREAT | 0600), "GPU rules: SysV msgget");
  refused(syscall(SYS_mq_open, "course-filter-test-none", O_RDONLY, 0, nullptr), "GPU rules: mq_open");
  return failures;
}

// Runs `checks` in a child under `rules` (or under nothing, COURSE_FILTER_TEST=unfiltered).
template <class Checks>
bool passes_in_child(const isolation::FilterRules& rules, bool unfiltered, Checks checks) {
  isolation::SeccompProgram filter(rules);
  const pid_t child = fork();
  if (child == 0) {
    if (!unfiltered) {
      const rlimit files{256, 256};
      setrlimit(RLIMIT_NOFILE, &files);
      filter.set_self(getpid());
      if (!filter.install()) {
        std::printf("FAIL the filter could not be installed\n");
        _exit(1);
      }
    }
    _exit(checks() == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // the child ends with _exit: nothing may wait in a buffer
  // "unfiltered": neither child installs its filter; "unfiltered-gpu": only the GPU rules' child
  // runs without it, so the GPU checks alone must make the test fail.
  const char* mode = std::getenv("COURSE_FILTER_TEST");
  const bool unfiltered = mode && std::strcmp(mode, "unfiltered") == 0;
  const bool gpu_unfiltered = unfiltered || (mode && std::strcmp(mode, "unfiltered-gpu") == 0);
  if (!isolation::SeccompProgram::supported()) {
    std::printf("SKIPPED: no seccomp filter on this platform\n");
    return 77;
  }
  const pid_t parent = getpid();
  char scratch[] = "/tmp/course-filter-test-XXXXXX";
  const int scratch_fd = mkstemp(scratch);
  if (scratch_fd < 0) {
    std::printf("FAIL no scratch file\n");
    return 1;
  }
  const bool cpu_ok = passes_in_child({/*gpu=*/false, /*trace=*/false, /*allow_exec_fd=*/true}, unfiltered,
                                      [&] { return run_checks(parent, scratch_fd); });
  const bool gpu_ok = passes_in_child({/*gpu=*/true, /*trace=*/false, /*allow_exec_fd=*/true}, gpu_unfiltered,
                                      [&] { return run_gpu_checks(parent, scratch); });
  close(scratch_fd);
  unlink(scratch);
  const bool ok = cpu_ok && gpu_ok;
  std::printf("%s\n", ok ? "the CPU and GPU labs' filters refuse and allow what they should"
                         : "a lab filter is not as it should be");
  return ok ? 0 : 1;
}
