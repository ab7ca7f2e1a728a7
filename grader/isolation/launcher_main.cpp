// lab_launcher: the first program inside the sandbox (bubblewrap's namespaces, lab_process.cpp).
// Trusted code that runs between the sandbox's set-up and the lab's program:
//
//   lab_launcher filter|no-filter      (the lab's program open at descriptor kExecFd)
//   lab_launcher probe                 (exits 0: the grader's check that the sandbox starts)
//
// It closes every descriptor the sandbox may have left open beyond the lab's four and kExecFd,
// lowers the limit on open files below kExecFd, installs the system-call filter for this
// process's own pid in its namespace ("filter": the CPU labs), and runs the lab's program
// through kExecFd: the filter is in force from that program's first instruction, as when the
// grader launches it without a sandbox.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "seccomp_filter.hpp"

extern char** environ;

int main(int argc, char** argv) {
  using isolation::kExecFd;
  if (argc == 2 && std::strcmp(argv[1], "probe") == 0) return 0;
  if (argc != 2 || (std::strcmp(argv[1], "filter") != 0 && std::strcmp(argv[1], "no-filter") != 0))
    return 127;
  // Only standard input, the log (stdout, stderr), the request and the reply pipes stay open.
  for (int fd = 5; fd < kExecFd; ++fd) close(fd);
  for (int fd = kExecFd + 1; fd < 4096; ++fd) close(fd);
  if (fcntl(kExecFd, F_SETFD, FD_CLOEXEC) != 0) return 127;  // the lab never holds it
  const rlimit files{256, 256};
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) return 127;
  char name[] = "lab";
  char* const lab_argv[] = {name, nullptr};
  if (std::strcmp(argv[1], "filter") == 0) {
    isolation::SeccompProgram filter(isolation::FilterRules{false, false, /*allow_exec_fd=*/true});
    filter.set_self(getpid());
    // A kernel without seccomp: the lab process's own copy (sandbox.cpp) warns in its log.
    filter.install();
  }
  syscall(SYS_execveat, kExecFd, "", lab_argv, environ, AT_EMPTY_PATH);
  return 127;
}
