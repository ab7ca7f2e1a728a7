// The lab process's system-call filter, installed before any of its code runs.
//
// It runs from .preinit_array: before every constructor of the executable (so before any static
// initializer of the student's code) and before main. From then on the kernel refuses, for this
// process and every thread it makes, the system calls a lab never needs and a hostile lab would:
//   - making processes or running programs: fork, vfork, clone without CLONE_THREAD, execve;
//   - touching other processes: kill/tgkill of anyone but itself, ptrace, process_vm_*;
//   - in CPU labs, writing files (open with a write flag, creat, rename, unlink, mkdir, link,
//     truncate, chmod, ...: it writes only to the descriptors it was given, the log and the
//     reply pipe) and the network; GPU labs keep both, which the CUDA driver needs;
//   - a few kernel interfaces that bypass this filter or reach beyond the process (io_uring,
//     bpf, mount, namespaces).
// A refused call fails with EPERM, as on a locked-down system; it does not kill the process.
// The filter exists only on x86-64 Linux; elsewhere the lab process runs unfiltered (README).
#include <fcntl.h>
#include <signal.h>
#include <ucontext.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__linux__) && defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#define COURSE_HAVE_SECCOMP 1
#endif

namespace {

#ifdef COURSE_HAVE_SECCOMP

bool g_trace = false;  // COURSE_SANDBOX=trace (see install_sandbox)

class Filter {
 public:
  // Load the syscall number; refuse other ABIs (x32 numbers have bit 30 set).
  Filter() {
    load(offsetof(seccomp_data, arch));
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
    code_.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    load_nr();
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
    code_.push_back(deny());
  }
  // Refuse this system call outright (with EPERM, or the error given).
  void refuse(long nr, int error = EPERM) {
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, std::uint32_t(nr), 0, 1));
    code_.push_back(deny(error));
  }
  // Refuse nr when (argument `arg` & mask) != 0 (low 32 bits, where flags live).
  void refuse_if_flags(long nr, int arg, std::uint32_t mask) {
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, std::uint32_t(nr), 0, 4));
    load(offsetof(seccomp_data, args) + 8 * arg);
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
    code_.push_back(deny());
    code_.push_back(allow());
  }
  // Refuse nr unless (argument `arg` & mask) != 0 (e.g. clone without CLONE_THREAD).
  void refuse_unless_flags(long nr, int arg, std::uint32_t mask) {
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, std::uint32_t(nr), 0, 4));
    load(offsetof(seccomp_data, args) + 8 * arg);
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 1, 0));
    code_.push_back(deny());
    code_.push_back(allow());
  }
  // Refuse nr unless argument `arg` equals value (e.g. kill(pid) of its own pid only).
  void refuse_unless_equal(long nr, int arg, std::uint32_t value) {
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, std::uint32_t(nr), 0, 4));
    load(offsetof(seccomp_data, args) + 8 * arg);
    code_.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, 1, 0));
    code_.push_back(deny());
    code_.push_back(allow());
  }
  bool install() {
    code_.push_back(allow());
    sock_fprog prog{static_cast<unsigned short>(code_.size()), code_.data()};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
  }

 private:
  // After an argument test the syscall number must be reloaded for the next rule; each rule
  // that loads an argument ends in allow/deny, so only the fall-through path continues.
  void load(std::size_t offset) {
    code_.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, std::uint32_t(offset)));
  }
  void load_nr() { load(offsetof(seccomp_data, nr)); }
  static sock_filter deny(int error = EPERM) {
    if (g_trace && error == EPERM) return BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
    return BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (std::uint32_t(error) & SECCOMP_RET_DATA));
  }
  static sock_filter allow() { return BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW); }
  std::vector<sock_filter> code_;
};

// COURSE_SANDBOX=off in the environment leaves the filter out (to show what it stops, and for
// platforms where it gets in the way); COURSE_SANDBOX=trace makes every refusal also print the
// system call's number to the lab process's log. getenv does not work this early: read envp.
bool has_setting(char** envp, const char* setting) {
  for (char** e = envp; e && *e; ++e)
    if (std::strcmp(*e, setting) == 0) return true;
  return false;
}

// COURSE_SANDBOX=trace: a refused call arrives here (SECCOMP_RET_TRAP). Say which, and make it
// fail with EPERM as it would have without the trace.
void on_refused_call(int, siginfo_t* info, void* context) {
  char msg[80];
  int n = 0;
  const char prefix[] = "[lab process] refused system call ";
  for (const char* p = prefix; *p; ++p) msg[n++] = *p;
  char digits[12];
  int d = 0;
  for (unsigned v = unsigned(info->si_syscall); d == 0 || v; v /= 10) digits[d++] = char('0' + v % 10);
  while (d) msg[n++] = digits[--d];
  msg[n++] = '\n';
  (void)!::write(2, msg, std::size_t(n));
  static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RAX] = -EPERM;
}

// CPU labs: at most COURSE_LAB_MEMORY_MB of address space (set by the grader; 0: no limit).
void limit_memory(char** envp) {
#ifndef COURSE_WORKER_GPU
  for (char** e = envp; e && *e; ++e)
    if (std::strncmp(*e, "COURSE_LAB_MEMORY_MB=", 21) == 0) {
      const long mb = std::atol(*e + 21);
      if (mb <= 0) return;
      const rlimit r{rlim_t(mb) << 20, rlim_t(mb) << 20};
      setrlimit(RLIMIT_AS, &r);
    }
#else
  (void)envp;
#endif
}

void install_sandbox(int, char**, char** envp) {
  limit_memory(envp);
  if (has_setting(envp, "COURSE_SANDBOX=off")) return;
  if (has_setting(envp, "COURSE_SANDBOX=trace")) {
    g_trace = true;
    struct sigaction sa {};
    sa.sa_sigaction = on_refused_call;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, nullptr);
  }
  Filter f;
  const auto self = std::uint32_t(getpid());
  for (long nr : {SYS_fork, SYS_vfork, SYS_execve, SYS_execveat, SYS_ptrace, SYS_process_vm_readv,
                  SYS_process_vm_writev, SYS_tkill, SYS_pidfd_open, SYS_pidfd_send_signal,
                  SYS_pidfd_getfd, SYS_setns, SYS_unshare, SYS_io_uring_setup, SYS_io_uring_enter,
                  SYS_io_uring_register, SYS_bpf, SYS_perf_event_open, SYS_userfaultfd,
                  SYS_mount, SYS_umount2, SYS_chroot, SYS_pivot_root, SYS_setsid, SYS_setpgid,
                  SYS_mknod, SYS_mknodat, SYS_name_to_handle_at, SYS_open_by_handle_at})
    f.refuse(nr);
  // clone3 passes its flags in memory, where a filter cannot look. "Not implemented" makes glibc
  // fall back to clone (EPERM would make pthread_create fail: the CUDA runtime needs threads).
  f.refuse(SYS_clone3, ENOSYS);
  // Threads yes (CLONE_THREAD), new processes no.
  f.refuse_unless_flags(SYS_clone, 0, CLONE_THREAD);
  // Signals only to itself (abort() and raise() do that).
  f.refuse_unless_equal(SYS_kill, 0, self);
  f.refuse_unless_equal(SYS_tgkill, 0, self);
  f.refuse_unless_equal(SYS_rt_sigqueueinfo, 0, self);
  f.refuse_unless_equal(SYS_rt_tgsigqueueinfo, 0, self);
#ifndef COURSE_WORKER_GPU
  // No file writes, no network. (Not in GPU labs: the CUDA driver opens its device files
  // read-write and creates and removes files of its own while it starts. There the lab process
  // may write where its user may: as user nobody, world-writable folders only.)
  for (long nr : {SYS_creat, SYS_rename, SYS_renameat, SYS_renameat2, SYS_unlink, SYS_unlinkat,
                  SYS_rmdir, SYS_mkdir, SYS_mkdirat, SYS_link, SYS_linkat, SYS_symlink,
                  SYS_symlinkat, SYS_truncate, SYS_chmod, SYS_fchmodat, SYS_chown, SYS_lchown,
                  SYS_fchownat, SYS_utimensat, SYS_utimes, SYS_utime, SYS_futimesat, SYS_openat2,
                  SYS_socket, SYS_socketpair})
    f.refuse(nr);
  const std::uint32_t write_flags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
  f.refuse_if_flags(SYS_open, 1, write_flags);
  f.refuse_if_flags(SYS_openat, 2, write_flags);
#endif
  if (!f.install()) {
    // A kernel without seccomp: say so in the log, and run (the README states what then holds).
    static const char msg[] = "[lab process] warning: the system-call filter could not be installed\n";
    (void)!::write(2, msg, sizeof msg - 1);
  }
}

#else
void install_sandbox(int, char**, char**) {}
#endif

}  // namespace

// Runs before all constructors of this executable; see the comment at the top.
__attribute__((section(".preinit_array"), used)) static void (*const course_preinit_sandbox)(
    int, char**, char**) = &install_sandbox;
