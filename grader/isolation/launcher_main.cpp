// lab_launcher: the first program inside the sandbox (bubblewrap's namespaces, lab_process.cpp).
// Trusted code that runs between the sandbox's set-up and the lab's program:
//
//   lab_launcher [--tasks=N] filter|gpu-filter|no-filter  (the lab's program open at kExecFd)
//   lab_launcher [--tasks=N] under TOOL [ARGS...]  (the same, run by a tool: compute-sanitizer)
//   lab_launcher probe                 (exits 0: the grader's check that the sandbox starts)
//
// --tasks=N limits the threads of the lab process (and of a tool's processes) to N beyond those
// in the sandbox now (task_limit.hpp; 0 or none: no limit). Set here, inside the user namespace,
// the kernel counts them in this namespace alone: the limit bounds this lab process, and no
// neighbour's threads count against it.
//
// It closes every descriptor the sandbox may have left open beyond the lab's four and kExecFd,
// lowers the limit on open files below kExecFd, installs the system-call filter for this
// process's own pid in its namespace ("filter": the CPU labs' rules; "gpu-filter": the GPU labs',
// which leave the CUDA driver its file writes), and runs the lab's program
// through kExecFd: the filter is in force from that program's first instruction, as when the
// grader launches it without a sandbox. "under" (no filter) runs TOOL ARGS... /tmp/lab: a tool
// runs its target by path, and the program's path outside the sandbox is not there, so the
// grader has bubblewrap bind the program (its descriptor) read-only at /tmp/lab. (A copy would
// not do: the lab's limit on file size, which bounds its log, is smaller than a GPU lab's
// program.) Every failure says why on standard error, which is the lab's log.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "seccomp_filter.hpp"
#include "task_limit.hpp"

extern char** environ;

namespace {

// "lab_launcher: WHAT: <errno's text>" on standard error (the lab's log), then exit code 127.
int fail(const char* what) {
  const char* why = std::strerror(errno);
  for (const char* part : {"lab_launcher: ", what, ": ", why, "\n"}) (void)!write(2, part, std::strlen(part));
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  using isolation::kExecFd;
  if (argc == 2 && std::strcmp(argv[1], "probe") == 0) return 0;
  if (argc >= 2 && std::strncmp(argv[1], "--tasks=", 8) == 0) {
    if (!isolation::limit_tasks_of_this_user(std::atol(argv[1] + 8)))
      return fail("cannot limit the number of threads");
    argv[1] = argv[0];  // the option read: the arguments after it are parsed as before
    ++argv, --argc;
  }
  if (argc >= 3 && std::strcmp(argv[1], "under") == 0) {
    for (int fd = 5; fd < 4096; ++fd) close(fd);
    static char program[] = "/tmp/lab";
    if (access(program, X_OK) != 0) return fail("the lab's program is not at /tmp/lab");
    std::vector<char*> tool_argv(argv + 2, argv + argc);
    tool_argv.push_back(program);
    tool_argv.push_back(nullptr);
    execve(tool_argv[0], tool_argv.data(), environ);
    return fail(argv[2]);
  }
  const bool cpu_filter = argc == 2 && std::strcmp(argv[1], "filter") == 0;
  const bool gpu_filter = argc == 2 && std::strcmp(argv[1], "gpu-filter") == 0;
  if (argc != 2 || (!cpu_filter && !gpu_filter && std::strcmp(argv[1], "no-filter") != 0)) {
    errno = EINVAL;
    return fail("usage: lab_launcher [--tasks=N] filter|gpu-filter|no-filter|under TOOL...|probe");
  }
  // Only standard input, the log (stdout, stderr), the request and the reply pipes stay open.
  for (int fd = 5; fd < kExecFd; ++fd) close(fd);
  for (int fd = kExecFd + 1; fd < 4096; ++fd) close(fd);
  if (fcntl(kExecFd, F_SETFD, FD_CLOEXEC) != 0) return fail("the lab's program is not open");  // the lab never holds it
  const rlimit files{256, 256};
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) return fail("cannot lower the limit on open files");
  char name[] = "lab";
  char* const lab_argv[] = {name, nullptr};
  if (cpu_filter || gpu_filter) {
    isolation::SeccompProgram filter(isolation::FilterRules{gpu_filter, false, /*allow_exec_fd=*/true});
    filter.set_self(getpid());
    // A kernel without seccomp: the lab process's own copy (sandbox.cpp) warns in its log.
    filter.install();
  }
  syscall(SYS_execveat, kExecFd, "", lab_argv, environ, AT_EMPTY_PATH);
  return fail("cannot run the lab's program");
}
