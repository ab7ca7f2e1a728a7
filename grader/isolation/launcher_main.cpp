// lab_launcher: the first program inside the sandbox (bubblewrap's namespaces, lab_process.cpp).
// Trusted code that runs between the sandbox's set-up and the lab's program:
//
//   lab_launcher filter|no-filter      (the lab's program open at descriptor kExecFd)
//   lab_launcher under TOOL [ARGS...]  (the same, run by a tool: compute-sanitizer)
//   lab_launcher probe                 (exits 0: the grader's check that the sandbox starts)
//
// It closes every descriptor the sandbox may have left open beyond the lab's four and kExecFd,
// lowers the limit on open files below kExecFd, installs the system-call filter for this
// process's own pid in its namespace ("filter": the CPU labs), and runs the lab's program
// through kExecFd: the filter is in force from that program's first instruction, as when the
// grader launches it without a sandbox. "under" (GPU labs, no filter) copies the program into
// the sandbox's own /tmp and runs TOOL ARGS... /tmp/lab: a tool runs its target by path, and
// the program's path outside the sandbox is not there.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "seccomp_filter.hpp"

extern char** environ;

namespace {

// The program at kExecFd copied to `path`, executable by its owner only; false on any failure.
bool copy_program(const char* path) {
  const int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
  if (out < 0) return false;
  char buffer[1 << 16];
  bool ok = lseek(isolation::kExecFd, 0, SEEK_SET) == 0;
  for (ssize_t n; ok && (n = read(isolation::kExecFd, buffer, sizeof buffer)) != 0;) {
    ok = n > 0;
    for (ssize_t done = 0; ok && done < n;) {
      const ssize_t w = write(out, buffer + done, std::size_t(n - done));
      ok = w > 0;
      done += ok ? w : 0;
    }
  }
  return close(out) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  using isolation::kExecFd;
  if (argc == 2 && std::strcmp(argv[1], "probe") == 0) return 0;
  if (argc >= 3 && std::strcmp(argv[1], "under") == 0) {
    for (int fd = 5; fd < kExecFd; ++fd) close(fd);
    for (int fd = kExecFd + 1; fd < 4096; ++fd) close(fd);
    static char program[] = "/tmp/lab";
    if (!copy_program(program)) return 127;
    close(kExecFd);
    std::vector<char*> tool_argv(argv + 2, argv + argc);
    tool_argv.push_back(program);
    tool_argv.push_back(nullptr);
    execve(tool_argv[0], tool_argv.data(), environ);
    return 127;
  }
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
