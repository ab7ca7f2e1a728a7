// The lab process's system-call filter (seccomp BPF), built in one place for the two sides that
// install it:
//   - the trusted grader, in the child it forks, or its launcher inside the sandbox, just before
//     it runs the lab's program (lab_process.cpp, launcher_main.cpp; CPU and GPU labs, each with
//     its rules). The filter is then in force from the program's first instruction: the
//     dynamic loader, IFUNC resolvers, .preinit_array, constructors and weak overrides of the
//     lab's code all run inside it, and so does every thread;
//   - the lab process itself, from .preinit_array (sandbox.cpp): a second, stacked copy (the
//     kernel applies every filter installed), the only one under COURSE_SANDBOX=trace.
// What it refuses:
//   - making processes or running programs: fork, vfork, clone without CLONE_THREAD, execve (the
//     grader's one exec of the lab's program is allowed through a descriptor number the program can
//     never hold: kExecFd, above the lab process's limit on open files);
//   - touching other processes: kill/tgkill of anyone but itself, ptrace, process_vm_*, pidfd_*,
//     and in CPU labs prlimit/sched_set*/setpriority on anyone but itself, setting resource
//     limits at all, asking for signals on a descriptor (fcntl F_SETOWN/F_SETSIG) and making
//     itself dumpable again;
//   - SysV IPC and POSIX message queues (CPU and GPU labs): they outlive the process, and a
//     shared memory segment is memory no limit of the process counts;
//   - in CPU labs, writing files (opening to write, and changing a file's mode, owner or extended
//     attributes, by path or by descriptor) and the network; GPU labs keep both, which the CUDA
//     driver needs;
//   - kernel interfaces that bypass the filter or reach beyond the process (io_uring, bpf, mount,
//     namespaces, perf events, userfaultfd).
// A refused call fails with EPERM (as on a locked-down system); it does not kill the process.
// x86-64 Linux only; elsewhere `supported()` is false and the lab process runs unfiltered.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <initializer_list>
#include <vector>

#if defined(__linux__) && defined(__x86_64__)
#include <linux/filter.h>
#define COURSE_HAVE_SECCOMP 1
#endif

namespace isolation {

// The descriptor through which the grader runs the lab's program (execveat). The lab process's
// limit on open files (256) keeps it from ever opening or duplicating a descriptor this high.
inline constexpr int kExecFd = 1023;

struct FilterRules {
  bool gpu = false;      // a GPU lab process: file writes and the network stay allowed
  bool trace = false;    // COURSE_SANDBOX=trace: a refusal raises SIGSYS (sandbox.cpp names it)
  bool allow_exec_fd = false;  // allow execveat(kExecFd, ...): the grader's launch only
};

class SeccompProgram {
 public:
  explicit SeccompProgram(const FilterRules& rules);
  // Writes the process's own pid into the rules that allow acting on itself. Only memory writes:
  // safe in a child between fork and exec.
  void set_self(pid_t pid);
  // no_new_privs, then the filter, for every thread of the process (TSYNC). Only system calls:
  // safe between fork and exec. False where seccomp is unavailable.
  bool install();
  static bool supported();

 private:
#ifdef COURSE_HAVE_SECCOMP
  void load(std::size_t offset);
  void load_nr();
  sock_filter deny(int error) const;
  void refuse(long nr, int error);
  void refuse_if_flags(long nr, int arg, unsigned mask);
  void refuse_unless_flags(long nr, int arg, unsigned mask);
  void refuse_unless_self(long nr, int arg, bool zero_is_self);
  void refuse_if_any_equal(long nr, int arg, std::initializer_list<unsigned> values);
  void refuse_if_nonzero_pointer(long nr, int arg);
  std::vector<sock_filter> code_;
  std::vector<std::size_t> self_slots_;  // instructions whose constant is the own pid
  bool trace_ = false;
#endif
};

}  // namespace isolation
