#include "seccomp_filter.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <initializer_list>

#ifdef COURSE_HAVE_SECCOMP
#include <linux/audit.h>
#include <linux/seccomp.h>
#endif

namespace isolation {

#ifdef COURSE_HAVE_SECCOMP

namespace {
// fchmodat2 (Linux 6.6) is newer than some system headers; x86-64's number.
#ifdef SYS_fchmodat2
constexpr int kSysFchmodat2 = SYS_fchmodat2;
#else
constexpr int kSysFchmodat2 = 452;
#endif
sock_filter allow() { return BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW); }
sock_filter jump_if_equal(std::uint32_t k, unsigned char if_true, unsigned char if_false) {
  return BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, if_true, if_false);
}
std::size_t arg_low(int arg) { return offsetof(seccomp_data, args) + 8 * std::size_t(arg); }
std::size_t arg_high(int arg) { return arg_low(arg) + 4; }
}  // namespace

bool SeccompProgram::supported() { return true; }

// Each rule tests the system call number first; one that loads an argument ends in allow or
// deny, so only the "not this call" path goes on, with the number loaded again.
void SeccompProgram::load(std::size_t offset) {
  code_.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, std::uint32_t(offset)));
}
void SeccompProgram::load_nr() { load(offsetof(seccomp_data, nr)); }

sock_filter SeccompProgram::deny(int error) const {
  if (trace_ && error == EPERM) return BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
  return BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (std::uint32_t(error) & SECCOMP_RET_DATA));
}

void SeccompProgram::refuse(long nr, int error) {
  code_.push_back(jump_if_equal(std::uint32_t(nr), 0, 1));
  code_.push_back(deny(error));
}

// Refuse nr when (argument `arg` & mask) != 0 (low 32 bits, where flags live).
void SeccompProgram::refuse_if_flags(long nr, int arg, unsigned mask) {
  code_.push_back(jump_if_equal(std::uint32_t(nr), 0, 4));
  load(arg_low(arg));
  code_.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
  code_.push_back(deny(EPERM));
  code_.push_back(allow());
}

// Refuse nr unless (argument `arg` & mask) != 0 (e.g. clone without CLONE_THREAD).
void SeccompProgram::refuse_unless_flags(long nr, int arg, unsigned mask) {
  code_.push_back(jump_if_equal(std::uint32_t(nr), 0, 4));
  load(arg_low(arg));
  code_.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 1, 0));
  code_.push_back(deny(EPERM));
  code_.push_back(allow());
}

// Refuse nr unless argument `arg` (a pid) is the process's own (set_self), or 0 where 0 means
// "this process".
void SeccompProgram::refuse_unless_self(long nr, int arg, bool zero_is_self) {
  code_.push_back(jump_if_equal(std::uint32_t(nr), 0, zero_is_self ? 7 : 6));
  load(arg_high(arg));  // a pid is non-negative: its high half is 0
  code_.push_back(jump_if_equal(0, 0, zero_is_self ? 3 : 2));
  load(arg_low(arg));
  if (zero_is_self) code_.push_back(jump_if_equal(0, 2, 0));
  self_slots_.push_back(code_.size());
  code_.push_back(jump_if_equal(0, 1, 0));  // the own pid, written by set_self
  code_.push_back(deny(EPERM));
  code_.push_back(allow());
}

// Refuse nr when argument `arg` is one of `values` (low 32 bits: commands such as F_SETOWN). One
// rule for all of them: a rule ends in allow or deny, so a second rule for nr would never be seen.
void SeccompProgram::refuse_if_any_equal(long nr, int arg, std::initializer_list<unsigned> values) {
  const auto count = static_cast<unsigned char>(values.size());
  code_.push_back(jump_if_equal(std::uint32_t(nr), 0, static_cast<unsigned char>(count + 3)));
  load(arg_low(arg));
  unsigned char i = 0;
  for (unsigned value : values) code_.push_back(jump_if_equal(value, static_cast<unsigned char>(count - i++), 0));
  code_.push_back(allow());
  code_.push_back(deny(EPERM));
}

// Refuse nr when pointer argument `arg` is not null (all 64 bits: prlimit's new limit).
void SeccompProgram::refuse_if_nonzero_pointer(long nr, int arg) {
  code_.push_back(jump_if_equal(std::uint32_t(nr), 0, 6));
  load(arg_low(arg));
  code_.push_back(jump_if_equal(0, 0, 2));
  load(arg_high(arg));
  code_.push_back(jump_if_equal(0, 1, 0));
  code_.push_back(deny(EPERM));
  code_.push_back(allow());
}

SeccompProgram::SeccompProgram(const FilterRules& rules) : trace_(rules.trace) {
  // Refuse other ABIs: a 32-bit or x32 call would bypass the numbers below.
  load(offsetof(seccomp_data, arch));
  code_.push_back(jump_if_equal(AUDIT_ARCH_X86_64, 1, 0));
  code_.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  load_nr();
  code_.push_back(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
  code_.push_back(deny(EPERM));

  for (long nr : {SYS_fork, SYS_vfork, SYS_execve, SYS_ptrace, SYS_process_vm_readv,
                  SYS_process_vm_writev, SYS_tkill, SYS_pidfd_open, SYS_pidfd_send_signal,
                  SYS_pidfd_getfd, SYS_setns, SYS_unshare, SYS_io_uring_setup, SYS_io_uring_enter,
                  SYS_io_uring_register, SYS_bpf, SYS_perf_event_open, SYS_userfaultfd,
                  SYS_mount, SYS_umount2, SYS_chroot, SYS_pivot_root, SYS_setsid, SYS_setpgid,
                  SYS_mknod, SYS_mknodat, SYS_name_to_handle_at, SYS_open_by_handle_at})
    refuse(nr, EPERM);
  // The grader's launch runs the lab's program through kExecFd; nothing else runs a program.
  if (rules.allow_exec_fd) {
    code_.push_back(jump_if_equal(SYS_execveat, 0, 4));
    load(arg_low(0));
    code_.push_back(jump_if_equal(std::uint32_t(kExecFd), 1, 0));
    code_.push_back(deny(EPERM));
    code_.push_back(allow());
  } else {
    refuse(SYS_execveat, EPERM);
  }
  // clone3 passes its flags in memory, where a filter cannot look. "Not implemented" makes glibc
  // fall back to clone (EPERM would make pthread_create fail: the CUDA runtime needs threads).
  refuse(SYS_clone3, ENOSYS);
  refuse_unless_flags(SYS_clone, 0, CLONE_THREAD);  // threads yes, new processes no
  // Signals only to itself (abort() and raise() do that).
  for (long nr : {SYS_kill, SYS_tgkill, SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo})
    refuse_unless_self(nr, 0, /*zero_is_self=*/false);
  // SysV IPC and POSIX message queues outlive the process, shared by its user, and a SysV shared
  // memory segment is memory that no limit of the process counts (GPU labs too: a whole grading
  // of lab 6 on an H200 under COURSE_SANDBOX=trace named no refused call).
  for (long nr : {SYS_shmget, SYS_shmat, SYS_shmctl, SYS_shmdt, SYS_semget, SYS_semop, SYS_semctl,
                  SYS_semtimedop, SYS_msgget, SYS_msgsnd, SYS_msgrcv, SYS_msgctl, SYS_mq_open,
                  SYS_mq_unlink})
    refuse(nr, EPERM);
  if (rules.gpu) {
    load_nr();  // every rule above ends with the number loaded or a return
    code_.push_back(allow());
    return;
  }
  // CPU labs: nothing on other processes, whatever the user they share.
#ifndef __SANITIZE_ADDRESS__  // (AddressSanitizer sets limits of its own: the course's ASan build)
  refuse_if_nonzero_pointer(SYS_prlimit64, 2);  // limits are read, never set (the grader sets them)
  refuse(SYS_setrlimit, EPERM);
#endif
  for (long nr : {SYS_sched_setaffinity, SYS_sched_setscheduler, SYS_sched_setparam, SYS_sched_setattr})
    refuse_unless_self(nr, 0, /*zero_is_self=*/true);
  refuse(SYS_setpriority, EPERM);  // PRIO_USER would reach every process of its user
  // A signal on I/O, sent to a process it names.
  refuse_if_any_equal(SYS_fcntl, 1, {unsigned(F_SETOWN), unsigned(F_SETSIG), unsigned(F_SETOWN_EX)});
  // Dumpable again would open its memory (/proc/pid/mem) to every process of its user.
  code_.push_back(jump_if_equal(SYS_prctl, 0, 6));
  load(arg_low(0));
  code_.push_back(jump_if_equal(PR_SET_DUMPABLE, 0, 3));
  load(arg_low(1));
  code_.push_back(jump_if_equal(0, 1, 0));
  code_.push_back(deny(EPERM));
  code_.push_back(allow());
  // No file writes, no network: a CPU lab writes only to the descriptors it was given.
  for (long nr : {SYS_creat, SYS_rename, SYS_renameat, SYS_renameat2, SYS_unlink, SYS_unlinkat,
                  SYS_rmdir, SYS_mkdir, SYS_mkdirat, SYS_link, SYS_linkat, SYS_symlink,
                  SYS_symlinkat, SYS_truncate, SYS_chmod, SYS_fchmodat, SYS_chown, SYS_lchown,
                  SYS_fchownat, SYS_utimensat, SYS_utimes, SYS_utime, SYS_futimesat, SYS_openat2,
                  SYS_socket, SYS_socketpair, SYS_fchmod, SYS_fchown, kSysFchmodat2, SYS_setxattr,
                  SYS_lsetxattr, SYS_fsetxattr, SYS_removexattr, SYS_lremovexattr, SYS_fremovexattr})
    refuse(nr, EPERM);  // (fchmod and fchown change a file through a descriptor opened to read)
  const unsigned write_flags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
  refuse_if_flags(SYS_open, 1, write_flags);
  refuse_if_flags(SYS_openat, 2, write_flags);
  load_nr();
  code_.push_back(allow());
}

void SeccompProgram::set_self(pid_t pid) {
  for (std::size_t i : self_slots_) code_[i].k = std::uint32_t(pid);
}

bool SeccompProgram::install() {
  sock_fprog prog{static_cast<unsigned short>(code_.size()), code_.data()};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0;
}

#else

SeccompProgram::SeccompProgram(const FilterRules&) {}
void SeccompProgram::set_self(pid_t) {}
bool SeccompProgram::install() { return false; }
bool SeccompProgram::supported() { return false; }

#endif

}  // namespace isolation
