// The lab process's system-call filter (seccomp_filter.hpp), installed by the lab process itself
// from .preinit_array: before every constructor of the executable and before main. The grader
// (or its launcher in the sandbox) has already installed the same filter before the program's
// first instruction (lab_process.cpp, launcher_main.cpp); this second, stacked copy is the only
// one under COURSE_SANDBOX=trace, where it names each refused call (a tool runs with neither).
#include <signal.h>
#include <ucontext.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "seccomp_filter.hpp"

namespace {

#ifdef COURSE_HAVE_SECCOMP

bool g_trace = false;  // COURSE_SANDBOX=trace (see install_sandbox)

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

void install_sandbox(int, char**, char** envp) {
  if (has_setting(envp, "COURSE_SANDBOX=off")) return;
  if (has_setting(envp, "COURSE_SANDBOX=trace")) {
    g_trace = true;
    struct sigaction sa {};
    sa.sa_sigaction = on_refused_call;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, nullptr);
  }
#ifdef COURSE_WORKER_GPU
  const bool gpu = true;
#else
  const bool gpu = false;
#endif
  // Not dumpable: no other process of its user may read its memory (/proc/pid/mem) or trace it.
  // A GPU lab too: its filter leaves file writes open for the CUDA driver, so without this a
  // neighbour graded without namespaces could open this one's /proc/pid/mem for writing.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  isolation::SeccompProgram filter({gpu, g_trace, /*allow_exec_fd=*/false});
  filter.set_self(getpid());
  if (!filter.install()) {
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
