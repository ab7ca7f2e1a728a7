#include "lab_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "course/errors.hpp"
#include "file_rules.hpp"
#include "seccomp_filter.hpp"
#include "task_limit.hpp"
#include "worker.hpp"

// Defined by the trusted side of the GPU labs (grader/gpu/gpu_harness.cpp): their lab processes
// start the CUDA driver, which runs under the filter's looser GPU rules (FilterRules::gpu) and
// without an address-space limit.
extern "C" bool course_grader_of_gpu_lab() __attribute__((weak));

namespace isolation {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atol(v) : fallback;
}

// A call's time limit in seconds, before a tool's factor (run_under): COURSE_CALL_TIMEOUT, else
// 10 s in a CPU lab and 60 s in a GPU lab. The slowest call of the CPU labs' solutions takes 0.2 s
// (lab 3's; labs 1 and 2: under 10 ms; lab 7's CPU part: 0.13 s), so 10 s is fifty times that,
// while a lab that hangs in every check loses 10 s a check, not a minute. A GPU lab's first call
// creates a CUDA context and may compile PTX for the GPU, and AddressSanitizer's build runs the
// lab's code several times slower: both keep 60 s.
long call_time_limit() {
  const bool gpu = course_grader_of_gpu_lab && course_grader_of_gpu_lab();
#ifdef COURSE_SANITIZE
  const long fallback = 60;
#else
  const long fallback = gpu ? 60 : 10;
#endif
  return std::max(1L, env_long("COURSE_CALL_TIMEOUT", fallback));
}

// Tells the runner, on the results pipe that only this trusted process holds (COURSE_RESULTS_FD,
// grader/common/grading.cpp), that a call was killed at its time limit after `seconds`: the runner
// then adds them to the lab's own time limit, up to a cap (wire.hpp, kKilledCallLine). One short
// write, so it cannot land inside a line of the results listener's (the grader has one thread).
void tell_runner_of_killed_call(double seconds) {
  const char* fd = std::getenv("COURSE_RESULTS_FD");
  if (!fd || !*fd) return;  // not run by the runner (a test, the precision report)
  const std::string line = std::string(kKilledCallLine) + '\t' + std::to_string(seconds) + '\n';
  (void)!::write(std::atoi(fd), line.data(), line.size());
}

// The launcher's descriptor in the sandbox's set-up (bubblewrap's --ro-bind-fd).
constexpr int kLauncherFd = kExecFd - 1;

void set_limit(int resource, rlim_t value) {
  const rlimit r{value, value};
  setrlimit(resource, &r);
}

// The sandbox program (bubblewrap), found on the grader's PATH; empty where it is not installed.
std::string find_bubblewrap() {
  if (const char* given = std::getenv("COURSE_BWRAP")) return access(given, X_OK) == 0 ? given : "";
  const std::string path = env_or("PATH", "/usr/bin:/bin");
  std::size_t at = 0;
  while (at <= path.size()) {
    const std::size_t end = std::min(path.find(':', at), path.size());
    const std::string candidate = path.substr(at, end - at) + "/bwrap";
    if (end > at && access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

// Whether this bubblewrap sizes a tmpfs (--size, bubblewrap 0.8): found by sandbox_works.
bool g_sized_tmpfs = true;

// bubblewrap's options: new user, PID, mount, IPC, network, UTS and cgroup namespaces; a root
// holding only the system's read-only /usr and libraries, a private /dev, /proc of the new PID
// namespace (no other process of the machine is visible) and an empty /tmp. Nothing of the
// course (build/, solutions/, reference/, other submissions) is there. A GPU lab also gets the
// GPU's device files (is_gpu_device_file: NVIDIA's, or WSL 2's dxg) and /sys (read-only). A tmpfs
// is memory that no limit of the process counts, and a GPU lab may write files (its filter leaves
// writes to the CUDA driver): so /tmp and /dev/shm are sized (COURSE_LAB_TMP_MB each) and the rest
// of /dev is read-only, where this bubblewrap can size them.
std::vector<std::string> sandbox_options(bool gpu) {
  std::vector<std::string> o = {"--unshare-all", "--die-with-parent"};
  for (const char* dir : kSystemFolders) {
    struct stat st;
    if (lstat(dir, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[256] = {};
      if (readlink(dir, target, sizeof target - 1) > 0) o.insert(o.end(), {"--symlink", target, dir});
    } else if (S_ISDIR(st.st_mode)) {
      o.insert(o.end(), {"--ro-bind", dir, dir});
    }
  }
  o.insert(o.end(),
           {"--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", "--dev", "/dev", "--proc", "/proc"});
  if (g_sized_tmpfs) {
    const std::string bytes = std::to_string(std::max(1L, env_long("COURSE_LAB_TMP_MB", 256)) << 20);
    o.insert(o.end(), {"--size", bytes, "--tmpfs", "/tmp", "--size", bytes, "--tmpfs", "/dev/shm"});
  } else {
    o.insert(o.end(), {"--tmpfs", "/tmp"});
  }
  o.insert(o.end(), {"--chdir", "/tmp"});
  if (gpu) {
    if (DIR* dev = opendir("/dev")) {
      while (dirent* e = readdir(dev))
        if (is_gpu_device_file(e->d_name)) {
          const std::string p = std::string("/dev/") + e->d_name;
          o.insert(o.end(), {"--dev-bind", p, p});
        }
      closedir(dev);
    }
    o.insert(o.end(), {"--ro-bind", "/sys", "/sys"});
  }
  // After the device files are bound: a remount that is not recursive leaves those writable.
  if (g_sized_tmpfs) o.insert(o.end(), {"--remount-ro", "/dev"});
  return o;
}

// The course's paths that no lab may see, real paths: the source tree (the solutions), the trusted
// build (the solutions' lab processes), and the grader's own folder (the build, where it was moved).
std::vector<std::string> course_paths() {
  std::vector<std::string> course;
  std::string grader_folder = real_path("/proc/self/exe");
  if (!grader_folder.empty()) grader_folder.erase(grader_folder.rfind('/'));
  for (const std::string& p : {grader_folder, std::string(COURSE_SOURCE_DIR), std::string(COURSE_BINARY_DIR)})
    if (std::string real = real_path(p); !real.empty()) course.push_back(real);
  return course;
}

// Where a GPU lab's program finds the CUDA runtime, if the system's folders do not hold it: the
// same for every lab process of this grader, so found once.
const std::string& runtime_folder_to_bind() {
  static const std::string folder = library_folder_to_bind(COURSE_CUDART_DIR, course_paths());
  return folder;
}

// The installation that holds a tool (compute-sanitizer: TOOLKIT/bin/..., or
// TOOLKIT/compute-sanitizer/...), to be bound into the sandbox: "" where /usr already holds it.
std::string tool_root(const std::string& tool) {
  const std::string path = real_path(tool);
  return path.empty() ? "" : tool_folder_to_bind(path, course_paths());
}

// The folders are named /tmp/course-lab-program-PID-XXXXXX, PID the grader's that made them:
// a grader killed with SIGKILL cannot remove its own, and the next one removes them (below).
constexpr char kCopyPrefix[] = "course-lab-program-";

// Removes a folder of program copies and the files in it; clears `dir`.
void remove_copy(std::string& dir) {
  if (dir.empty()) return;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') unlink((dir + "/" + e->d_name).c_str());
    closedir(d);
  }
  rmdir(dir.c_str());
  dir.clear();
}

// Removes the program copies that graders no longer running left in /tmp: folders of this
// user (not links) whose PID names no process. Once per grader, before its first copy. A PID
// that was reused keeps its folder (a leak, never a removal of a live grader's copy); a grader in
// another PID namespace that shares this /tmp is not told apart, which is why only this user's
// folders are considered.
void remove_orphaned_copies() {
  static bool done = false;
  if (done) return;
  done = true;
  DIR* tmp = opendir("/tmp");
  if (!tmp) return;
  const std::size_t prefix = std::strlen(kCopyPrefix);
  while (dirent* e = readdir(tmp)) {
    if (std::strncmp(e->d_name, kCopyPrefix, prefix) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(e->d_name + prefix, &end, 10);
    if (end == e->d_name + prefix || *end != '-' || pid <= 0) continue;  // not one of ours
    std::string path = std::string("/tmp/") + e->d_name;
    struct stat st{};
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
    if (kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // its grader still runs (or may)
    remove_copy(path);
  }
  closedir(tmp);
}

// A copy of the lab's program that the lab process's user can run by its path, in a new folder
// of /tmp that only its owner may write in; returns the folder ("" when the copy failed). Without
// namespaces a tool (compute-sanitizer) runs as the lab process's user, starts the program by its
// path, and reaches the folder it was started in by its path; that user often can reach neither
// the trusted build nor the grading's folders (under /root, or the runner's private ones), and
// compute-sanitizer then said only "Error launching target app." The tool starts in this folder.
// The lab's program holds nothing the lab process may not read: it is the lab process.
std::string reachable_copy(const std::string& binary, std::string& copy_path) {
  remove_orphaned_copies();
  std::string name = std::string("/tmp/") + kCopyPrefix + std::to_string(getpid()) + "-XXXXXX";
  std::vector<char> dir(name.begin(), name.end());
  dir.push_back('\0');
  if (!mkdtemp(dir.data())) return "";
  chmod(dir.data(), 0711);  // others may reach the file by name, not list or change the folder
  copy_path = std::string(dir.data()) + "/" + binary.substr(binary.rfind('/') + 1);
  std::ifstream in(binary, std::ios::binary);
  const int fd = open(copy_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
  if (fd >= 0) fchmod(fd, 0755);  // whatever the umask: the lab's user must be able to run it
  bool copied = in && fd >= 0;
  char buffer[1 << 16];
  while (copied && in.read(buffer, sizeof buffer).gcount() > 0) {
    const std::streamsize n = in.gcount();
    copied = ::write(fd, buffer, std::size_t(n)) == n;
  }
  if (fd >= 0) close(fd);
  if (!copied) {
    const int why = errno;  // the failed step's, for the caller's message, not the clean-up's
    unlink(copy_path.c_str());
    rmdir(dir.data());
    errno = why;
    return "";
  }
  return dir.data();
}

// Drops root for `uid` (group and supplementary groups too), between fork and exec: async-signal-safe.
bool become_user(uid_t uid) { return setgroups(0, nullptr) == 0 && setgid(uid) == 0 && setuid(uid) == 0; }

// Whether `uid` may run the program at `path` (every folder on its way open to it): asked of a
// child that becomes that user.
bool runnable_by(uid_t uid, const std::string& path) {
  const pid_t child = fork();
  if (child < 0) return true;  // cannot tell: the launch will say what fails
  if (child == 0) _exit(become_user(uid) && access(path.c_str(), X_OK) == 0 ? 0 : 1);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Lets this process hold descriptors up to kExecFd (a soft limit on open files of 1024 or more;
// async-signal-safe).
void allow_descriptors_up_to_exec_fd() {
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur <= rlim_t(kExecFd)) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, kExecFd + 1);
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

// How the lab process is started: its limits, its user, and the system-call filter (built before
// the fork, so that the child only writes two numbers into it) or none.
struct Launch {
  const char* binary;
  const char* scratch;
  bool drop_privileges;
  uid_t uid;                      // the lab process's user when privileges are dropped
  rlim_t cpu_seconds;
  long memory_mb;                 // address space (CPU labs), 0: no limit
  long data_mb;                   // private writable memory, the heap included (GPU labs), 0: none
  rlim_t most_tasks;              // RLIMIT_NPROC without namespaces (task_limit.hpp), 0: none
  SeccompProgram* filter;         // installed before exec (CPU labs, no sandbox), or nullptr
  int file_rules;                 // Landlock's ruleset without namespaces (file_rules.hpp), or -1
  char* const* sandbox_argv;      // bubblewrap ... lab_launcher, or nullptr: no namespaces
  char* const* tool_argv;         // without namespaces: the tool and its options, then the
                                  // program (run_under), or nullptr
  const char* launcher;           // lab_launcher (with sandbox_argv)
  char* const* envp;
};

// Everything between fork and exec: only async-signal-safe calls.
[[noreturn]] void become_lab_process(const Launch& l, int request_fd, int reply_fd, int log_fd) {
  const pid_t grader = getppid();
  setsid();                          // its own session and process group
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the grader (set again below if the user changes)
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0) _exit(127);
  // Move the four descriptors above the target numbers first, so that no dup2 clobbers another.
  // Any failure ends the child: a descriptor left in place could be one of the grader's (its
  // results pipe is 3 in the grader), which the lab must never hold.
  const int sources[5] = {devnull, log_fd, log_fd, request_fd, reply_fd};
  int high[5];
  for (int i = 0; i < 5; ++i)
    if ((high[i] = fcntl(sources[i], F_DUPFD, 64)) < 0) _exit(127);
  for (int i = 0; i < 5; ++i)
    if (dup2(high[i], i) != i) _exit(127);
  // Without namespaces, the file-system rules before anything else is opened: the program (a rule
  // of its own lets it be read and run) and, through it, every file the lab touches.
  if (l.file_rules >= 0 && !FileRules::apply(l.file_rules)) _exit(125);
  // Everything from 5 up closed: close_range where the kernel has it (Linux 5.9), else a loop.
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 5u, ~0u, 0u) != 0)
#endif
    for (int fd = 5; fd < 4096; ++fd) close(fd);
  // The program is run through kExecFd, opened now (while the grader's user can read it), above
  // the limit on open files set below: the filter allows running a program through that
  // descriptor alone, which the lab process can never hold again (it closes on the lab's exec,
  // and the lab cannot make one that high). In the sandbox, the launcher runs it from there, and
  // the launcher itself is run from kLauncherFd.
  allow_descriptors_up_to_exec_fd();
  const bool sandboxed = l.sandbox_argv != nullptr;
  {
    const int fd = open(l.binary, O_RDONLY | (sandboxed ? 0 : O_CLOEXEC));
    if (fd < 0 || fcntl(fd, sandboxed ? F_DUPFD : F_DUPFD_CLOEXEC, kExecFd) != kExecFd) _exit(127);
    close(fd);
  }
  if (sandboxed) {
    const int fd = open(l.launcher, O_RDONLY);
    if (fd < 0 || fcntl(fd, F_DUPFD, kLauncherFd) != kLauncherFd) _exit(127);
    close(fd);
  }
  if (chdir(l.scratch) != 0) (void)!chdir("/");
  set_limit(RLIMIT_CORE, 0);
  if (!sandboxed) set_limit(RLIMIT_NOFILE, 256);  // in the sandbox, the launcher lowers it
  set_limit(RLIMIT_FSIZE, rlim_t(env_long("COURSE_LOG_LIMIT", 1 << 20)));
  set_limit(RLIMIT_CPU, l.cpu_seconds);
  if (l.memory_mb > 0) set_limit(RLIMIT_AS, rlim_t(l.memory_mb) << 20);
  if (l.data_mb > 0) set_limit(RLIMIT_DATA, rlim_t(l.data_mb) << 20);
  // In the sandbox, the launcher sets the limit on threads, counted in its user namespace.
  if (!sandboxed && l.most_tasks > 0) set_limit(RLIMIT_NPROC, l.most_tasks);
  signal(SIGXFSZ, SIG_IGN);  // a full log makes writes fail (EFBIG), it does not kill the lab
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (l.drop_privileges) {
    if (!become_user(l.uid)) _exit(126);
    // A change of user clears the parent-death signal: set it again, and end here if the grader
    // died before it was set.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != grader) _exit(126);
  }
  if (sandboxed) {
    execve(l.sandbox_argv[0], l.sandbox_argv, l.envp);
    _exit(127);
  }
  if (l.tool_argv) {  // a tool that runs the program (run_under), without the filter
    execve(l.tool_argv[0], l.tool_argv, l.envp);
    _exit(127);
  }
  char* const argv[] = {const_cast<char*>(l.binary), nullptr};
  if (l.filter) {
    // From here on the filter holds, for the dynamic loader, IFUNC resolvers, constructors and
    // every thread of the lab's program. A kernel without seccomp: the lab process's own copy
    // (sandbox.cpp) is all there is.
    l.filter->set_self(getpid());
    l.filter->install();
  }
  syscall(SYS_execveat, kExecFd, "", argv, l.envp, AT_EMPTY_PATH);
  _exit(127);
}

const std::string& bubblewrap() {
  static const std::string path = find_bubblewrap();
  return path;
}

// The trusted launcher (launcher_main.cpp), built beside the graders.
const std::string& launcher_path() {
#ifdef COURSE_LAB_LAUNCHER
  static const std::string path = COURSE_LAB_LAUNCHER;
#else
  static const std::string path;
#endif
  return path;
}

// The launcher is run in the sandbox through the descriptor the grader's child opened
// (kLauncherFd), which needs no path to it: the lab process's user may be unable to reach the
// trusted build, and nothing of it is mounted there.
std::string launcher_in_sandbox() { return "/proc/self/fd/" + std::to_string(kLauncherFd); }

// Runs bubblewrap with `args`, its output thrown away and its environment empty, and says whether
// it exited 0. In the child, `prepare` runs first: a non-zero code it returns is the child's exit.
template <class Prepare>
bool bubblewrap_exits_zero(std::vector<std::string> args, Prepare prepare) {
  args.insert(args.begin(), bubblewrap());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* const envp[] = {nullptr};
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0), dup2(devnull, 1), dup2(devnull, 2);
    if (const int code = prepare(); code != 0) _exit(code);
    execve(argv[0], argv.data(), envp);
    _exit(127);
  }
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// One try of the sandbox with the current options: the launcher's probe, as the lab's user.
bool sandbox_starts(bool drop, uid_t uid) {
  std::vector<std::string> args = sandbox_options(false);
  args.insert(args.end(), {"--", launcher_in_sandbox(), "probe"});
  return bubblewrap_exits_zero(std::move(args), [&] {
    allow_descriptors_up_to_exec_fd();
    const int launcher = open(launcher_path().c_str(), O_RDONLY);
    if (launcher < 0 || fcntl(launcher, F_DUPFD, kLauncherFd) != kLauncherFd) return 127;
    if (drop && !become_user(uid)) return 126;
    return 0;
  });
}

// Can bubblewrap make its namespaces here and start the launcher, for the lab process's user?
// Tried once per grader: kernels or policies that forbid unprivileged user namespaces make it
// fail, and the lab process then runs under the filter alone (its log says so).
bool sandbox_works(bool drop, uid_t uid) {
  static int works = -1;
  if (works >= 0) return works == 1;
  works = 0;
  if (bubblewrap().empty() || launcher_path().empty()) return false;
  // An older bubblewrap, without --size, still makes the namespaces (with /tmp unsized).
  g_sized_tmpfs = true;
  works = sandbox_starts(drop, uid);
  if (!works) {
    g_sized_tmpfs = false;
    works = sandbox_starts(drop, uid);
  }
  return works == 1;
}

// Can bubblewrap bind an open descriptor (--ro-bind-fd)? A lab run under a tool needs it: the tool
// is given the lab's program as /tmp/lab, bound from the descriptor the grader opened (the lab's
// user may be unable to reach the build by path). bubblewrap 0.10 has it, and Debian 12's 0.8 and
// Ubuntu 24.04's 0.9 with their updates, but not Ubuntu 24.04's 0.9 as released: there a run under
// a tool goes without namespaces, and its log says why. bubblewrap reads its options in order, so
// an unknown option fails before --version prints and exits 0.
bool bubblewrap_binds_descriptors() {
  static const bool binds = !bubblewrap().empty() &&
                            bubblewrap_exits_zero({"--ro-bind-fd", "0", "/tmp/lab", "--version"}, [] { return 0; });
  return binds;
}

// The memory limits, for the log's first line (grade-all shares the machine's memory among the
// submissions it grades at once: what a lab process got depends on --jobs).
std::string memory_limits(long memory_mb, long data_mb) {
  std::string s;
  if (memory_mb > 0) s += ", with " + std::to_string(memory_mb) + " MiB of address space";
  if (data_mb > 0) s += ", with " + std::to_string(data_mb) + " MiB of private writable memory";
  return s;
}

// bubblewrap reports a lab process killed by signal S as its own exit code 128 + S.
std::string describe_status(int status, bool namespaced) {
  const bool signalled_in_sandbox =
      namespaced && WIFEXITED(status) && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 128 + 65;
  if (WIFSIGNALED(status) || signalled_in_sandbox) {
    const int sig = signalled_in_sandbox ? WEXITSTATUS(status) - 128 : WTERMSIG(status);
    std::string name = strsignal(sig);
    if (sig == SIGXCPU) name += ": its CPU-time limit";
    if (sig == SIGSYS) name += ": a forbidden system call";
    return "crashed (" + name + ")";
  }
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 127) return "could not be started (exit code 127)";
    return "exited (exit code " + std::to_string(WEXITSTATUS(status)) + ") before answering";
  }
  return "stopped";
}

// A program that the dynamic loader could not start says so in its output; that is the
// machine's setup, not the lab's code, and the student is told so.
std::string loader_hint(const std::string& output, bool limited_view) {
  if (output.find("error while loading shared libraries") == std::string::npos) return "";
  if (!limited_view)
    return "; the lab's program could not load a shared library it needs: build it again on this machine";
  return "; the lab's program could not load a shared library it needs: the lab process sees the "
         "system's folders (/usr, /lib and the like) and the folder of the CUDA runtime that the course "
         "was configured with, so a library elsewhere (another toolkit's, one the course's build folder "
         "holds) is out of its reach. That is this machine's setup, not the lab's code: on your own "
         "machine, COURSE_SANDBOX=off grades without the sandbox";
}

}  // namespace

LabProcess::LabProcess(std::string binary, std::string who)
    : binary_(std::move(binary)), who_(std::move(who)) {
  // The lab process starts in its scratch folder: its program must be named absolutely.
  if (std::string real = binary_.empty() ? "" : real_path(binary_); !real.empty()) binary_ = real;
  signal(SIGPIPE, SIG_IGN);  // writing to a dead lab process must not kill the grader
  scratch_ = env_or("COURSE_SCRATCH", "/tmp");
  log_path_ = env_or("COURSE_LAB_LOG", "/dev/null");
}

LabProcess::~LabProcess() { stop(); }

bool LabProcess::available() const { return !binary_.empty() && access(binary_.c_str(), X_OK) == 0; }

void LabProcess::start() {
  if (!available())
    throw LabFailure(who_ + " was not built, so it cannot run" +
                     (binary_.empty() ? std::string() : " (no program at " + binary_ + ")"));
  int request[2], reply[2];
  if (pipe2(request, O_CLOEXEC) != 0) throw LabFailure(std::string("cannot make pipes: ") + std::strerror(errno));
  if (pipe2(reply, O_CLOEXEC) != 0) {
    const int error = errno;
    close(request[0]), close(request[1]);
    throw LabFailure(std::string("cannot make pipes: ") + std::strerror(error));
  }
  const int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  // A start that cannot go on: the pipes and the log are closed, and `why` is what the checks say.
  // (Callers pass strerror(errno) in `why`, built before anything here is closed.)
  const auto give_up = [&](const std::string& why) {
    for (int fd : {request[0], request[1], reply[0], reply[1], log_fd})
      if (fd >= 0) close(fd);
    throw LabFailure(why);
  };
  const bool drop = geteuid() == 0 && env_or("COURSE_DROP_PRIVILEGES", "1") != "0";
  const uid_t uid = uid_t(env_long("COURSE_LAB_UID", 65534));
  const bool gpu = course_grader_of_gpu_lab && course_grader_of_gpu_lab();
  // An address-space limit in CPU labs only: the CUDA driver reserves address space far beyond any.
#ifdef COURSE_SANITIZE
  const long memory_mb = 0, data_mb = 0;  // AddressSanitizer reserves terabytes of shadow memory
  const bool sanitized = true;  // AddressSanitizer starts before main and needs more (the filter from
                                // .preinit_array still holds; the course's ASan build tests memory)
#else
  const long memory_mb = gpu ? 0 : env_long("COURSE_LAB_MEMORY_MB", 8192);
  // A GPU lab gets no address-space limit (the CUDA driver reserves far more address space than
  // it uses) but a limit on its private writable memory, which the driver's reservations and its
  // mappings of the device files do not count against: without one, a GPU lab's heap could take
  // the machine's memory from the labs graded beside it.
  const long data_mb = gpu ? env_long("COURSE_LAB_GPU_DATA_MB", 16384) : 0;
  const bool sanitized = false;
#endif
  const rlim_t cpu = rlim_t(env_long("COURSE_LAB_CPU_SECONDS", 600));
  // Threads the lab process may start (task_limit.hpp: a lab must not take the machine's PIDs).
  const long task_allowance = env_long("COURSE_LAB_TASKS", kDefaultLabTasks);
  const std::string tasks_option = "--tasks=" + std::to_string(std::max(task_allowance, 0L));
  // COURSE_SANDBOX: "on" (the default): bubblewrap's namespaces where bubblewrap works here, and
  // the system-call filter before the lab's first instruction (CPU labs); "filter": the filter
  // alone, which is what "on" falls back to without bubblewrap; "trace": only the lab process's
  // own filter, naming each refused call in its log; "off": neither.
  const std::string mode = env_or("COURSE_SANDBOX", "on");
  // The filter is installed before the lab's program runs, for CPU and GPU labs alike (GPU labs
  // get the rules the CUDA driver can live with: FilterRules::gpu).
  const bool want_filter = !sanitized && tool_.empty() && (mode == "on" || mode == "filter");
  std::unique_ptr<SeccompProgram> filter;
  std::vector<std::string> sandbox_args;
  const std::string runtime_folder = gpu ? runtime_folder_to_bind() : "";
  const bool namespaces_here = mode == "on" && sandbox_works(drop, uid);
  const bool tool_unbindable = namespaces_here && !tool_.empty() && !bubblewrap_binds_descriptors();
  if (namespaces_here && !tool_unbindable) {
    sandbox_args = sandbox_options(gpu);
    sandbox_args.insert(sandbox_args.begin(), bubblewrap());
    if (!runtime_folder.empty())
      sandbox_args.insert(sandbox_args.end(), {"--ro-bind", runtime_folder, runtime_folder});
    if (!tool_.empty()) {
      // The tool's installation, read-only, where /usr does not hold it (a toolkit in /opt).
      const std::string root = tool_root(tool_[0]);
      if (!root.empty()) sandbox_args.insert(sandbox_args.end(), {"--ro-bind", root, root});
      // The lab's program, where the tool can name it: bound from its descriptor, read-only.
      sandbox_args.insert(sandbox_args.end(), {"--ro-bind-fd", std::to_string(kExecFd), "/tmp/lab"});
      sandbox_args.insert(sandbox_args.end(), {"--", launcher_in_sandbox(), tasks_option, "under"});
      sandbox_args.insert(sandbox_args.end(), tool_.begin(), tool_.end());
    } else {
      sandbox_args.insert(sandbox_args.end(), {"--", launcher_in_sandbox(), tasks_option,
                                               !want_filter ? "no-filter" : gpu ? "gpu-filter" : "filter"});
    }
  } else if (want_filter && SeccompProgram::supported()) {
    filter = std::make_unique<SeccompProgram>(FilterRules{gpu, false, /*allow_exec_fd=*/true});
  }
  namespaced_ = !sandbox_args.empty();
  // Without namespaces the machine's files are in view: Landlock's rules give the sandbox's view
  // instead (file_rules.hpp), wherever the filter is installed (COURSE_LANDLOCK=off leaves them
  // out, to show what they stop).
  std::unique_ptr<FileRules> file_rules;
  if (!namespaced_ && want_filter && env_or("COURSE_LANDLOCK", "on") != "off")
    file_rules = std::make_unique<FileRules>(binary_, gpu, course_paths(),
                                             runtime_folder.empty() ? std::vector<std::string>{}
                                                                    : std::vector<std::string>{runtime_folder});
  limited_view_ = namespaced_ || (file_rules && file_rules->ready());
  lab_pid_ = -1;
  if (!said_how_ && log_fd >= 0) {
    said_how_ = true;
    std::string how = "[grader] the lab process runs " +
                      std::string(tool_unbindable
                                      ? "without namespaces (this bubblewrap cannot bind a descriptor, "
                                        "--ro-bind-fd, which a run under a tool needs), "
                                  : !namespaced_   ? "without namespaces, "
                                  : g_sized_tmpfs ? "in bubblewrap's namespaces, "
                                                  : "in bubblewrap's namespaces (its /tmp unsized: bubblewrap < 0.8), ") +
                      (want_filter ? "under the system-call filter, " : "without the system-call filter, ") +
                      (!file_rules              ? ""
                       : file_rules->ready() ? "within Landlock's file rules, "
                                             : "without file rules (no Landlock here: it sees the machine's files), ") +
                      (drop ? "as uid " + std::to_string(uid) : "as the grader's user") +
                      (runtime_folder.empty() || !limited_view_
                           ? std::string()
                           : ", the CUDA runtime's folder in view (" + runtime_folder + ")") +
                      (tool_.empty() ? std::string() : ", run by " + tool_[0]) +
                      memory_limits(memory_mb, data_mb) + "\n";
    (void)!::write(log_fd, how.data(), how.size());
  }
  // What this lab process prints comes after what is in the log now (the grader's line above, an
  // earlier lab process's output): a failure quotes only its own (log_tail).
  struct stat log_stat {};
  output_from_ = log_fd >= 0 && fstat(log_fd, &log_stat) == 0 ? static_cast<long long>(log_stat.st_size) : 0;
  std::vector<char*> sandbox_argv;
  for (auto& a : sandbox_args) sandbox_argv.push_back(a.data());
  sandbox_argv.push_back(nullptr);
  std::vector<std::string> tool_args = tool_;
  std::string program = binary_;
  // A tool run as the lab's user must reach the program: without namespaces it runs it by path,
  // and bubblewrap resolves the path behind the descriptor it binds. A build in a folder only the
  // grader's user may enter (a clone under a private mktemp -d, or /root) is out of reach, so the
  // program is copied where that user can reach it, and run from the copy.
  if (!tool_.empty() && drop) {
    // The lab's user starts the tool (and bubblewrap, as that user, binds its installation): a
    // tool in a folder closed to other users would fail every check with a launch error that
    // reads like the lab's fault, so it is named here instead.
    if (!runnable_by(uid, tool_[0]))
      give_up("COURSE_LAB_TOOL's " + tool_[0] + " cannot be run by the lab process's user (uid " +
              std::to_string(uid) + "): a folder on its way is closed to other users. Install the tool "
              "where every user may run it (as under /usr/local or /opt)");
    remove_copy(program_copy_dir_);
    program_copy_dir_ = reachable_copy(binary_, program);
    if (program_copy_dir_.empty())
      give_up("the grader could not copy the program of " + who_ + " where " + tool_[0] +
              " can start it as uid " + std::to_string(uid) + " (in /tmp): " + std::strerror(errno));
  }
  tool_args.push_back(program);
  std::vector<char*> tool_argv;
  for (auto& a : tool_args) tool_argv.push_back(a.data());
  tool_argv.push_back(nullptr);
  // The environment of the lab process: nothing of ours, only what its libraries need, and
  // COURSE_SHARED_MEMORY_PER_BLOCK (course/gpu.hpp: the GPU labs' tiles as a smaller GPU runs them).
  std::vector<std::string> env_strings = {"PATH=/usr/bin:/bin", "LC_ALL=C", "CUDA_CACHE_DISABLE=1"};
  for (const char* keep : {"CUDA_VISIBLE_DEVICES", "COURSE_SANDBOX", "ASAN_OPTIONS", "UBSAN_OPTIONS",
                           "COURSE_SHARED_MEMORY_PER_BLOCK"})
    if (const char* v = std::getenv(keep); v && !(tool_.size() && std::strcmp(keep, "COURSE_SANDBOX") == 0))
      env_strings.push_back(std::string(keep) + "=" + v);
  // Under a tool, the program's own copy of the filter (sandbox.cpp) is left out too: a tool's
  // code runs inside its process (compute-sanitizer's instrumentation, valgrind's) and makes calls
  // the filter refuses. The namespaces still hold.
  if (!tool_.empty()) env_strings.push_back("COURSE_SANDBOX=off");
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  const std::string& start_in = program_copy_dir_.empty() ? scratch_ : program_copy_dir_;
  // Without namespaces the count is the lab user's, machine-wide: what it runs now, plus the
  // allowance (counted here, before the fork: the child may only make async-signal-safe calls).
  // A lab process that runs as the grading user shares that count with the grading itself (the
  // compilers of submissions built beside it, other lab processes), which grows after it starts:
  // four times the allowance, so that the growth cannot starve an honest lab of its threads.
  const long allowance = drop ? task_allowance : 4 * task_allowance;
  const rlim_t most_tasks =
      namespaced_ || task_allowance <= 0 ? 0 : rlim_t(tasks_of_user(drop ? uid : getuid()) + allowance);
  const Launch launch{program.c_str(), start_in.c_str(), drop, uid, cpu, memory_mb, data_mb, most_tasks,
                      filter.get(), file_rules ? file_rules->fd() : -1,
                      namespaced_ ? sandbox_argv.data() : nullptr,
                      !namespaced_ && !tool_.empty() ? tool_argv.data() : nullptr,
                      launcher_path().c_str(), envp.data()};
  const pid_t pid = fork();
  if (pid < 0) give_up(std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) become_lab_process(launch, request[0], reply[1], log_fd < 0 ? 2 : log_fd);
  close(request[0]);
  close(reply[1]);
  if (log_fd >= 0) close(log_fd);
  pid_ = pid;
  // Non-blocking, so that a request the lab process never reads times out (call) instead of
  // holding the grader once the pipe is full.
  fcntl(request[1], F_SETFL, fcntl(request[1], F_GETFL) | O_NONBLOCK);
  to_lab_ = request[1];
  from_lab_ = reply[0];
}

void LabProcess::stop() {
  if (to_lab_ >= 0) close(to_lab_);
  if (from_lab_ >= 0) close(from_lab_);
  to_lab_ = from_lab_ = -1;
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);  // the whole process group
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
  remove_copy(program_copy_dir_);
}

void LabProcess::restart() { stop(); }

// A line of the grader's own in the lab process's log, between the lab's lines (they append).
void LabProcess::note_in_log(const std::string& line) const {
  if (log_path_ == "/dev/null") return;
  const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, line.data(), line.size());
  close(fd);
}

void LabProcess::run_under(std::vector<std::string> tool, int call_time_factor, std::string log_path) {
  stop();
  tool_ = std::move(tool);
  // Its real path: the sandbox holds /usr but not /etc (links through /etc/alternatives).
  if (std::string real = tool_.empty() ? "" : real_path(tool_[0]); !real.empty()) tool_[0] = real;
  call_time_factor_ = std::max(1, call_time_factor);
  log_path_ = std::move(log_path);
  said_how_ = false;
}

int LabProcess::finish(int seconds) {
  if (to_lab_ >= 0) close(to_lab_);  // the lab's program reads the end of its requests and returns
  to_lab_ = -1;
  int code = -1;
  if (pid_ > 0) {
    int status = 0;
    pid_t done = 0;
    for (int waited_ms = 0; waited_ms < seconds * 1000 && (done = waitpid(pid_, &status, WNOHANG)) == 0;
         waited_ms += 20)
      usleep(20000);
    if (done == pid_) {
      pid_ = -1;
      // bubblewrap passes the exit code on; 128 + S is a signal S inside it (describe_status).
      if (WIFEXITED(status) && !(namespaced_ && WEXITSTATUS(status) > 128)) code = WEXITSTATUS(status);
    }
  }
  stop();
  return code;
}

std::string LabProcess::log_tail() const {
  std::ifstream in(log_path_, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  // The last 600 bytes that this lab process printed, never the grader's own line about the
  // sandbox or an earlier process's output (nothing, where it printed nothing).
  const std::streamoff from = std::max<std::streamoff>(output_from_, size > 600 ? size - 600 : 0);
  if (from >= size) return "";
  in.seekg(from);
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return safe_text(tail, 600, false);
}

void LabProcess::fail(const std::string& function, const std::string& what) {
  std::string status;
  if (pid_ > 0) {
    int st = 0;
    // A process that closed its pipe is usually dying; give it a moment before we kill it.
    for (int i = 0; i < 50 && waitpid(pid_, &st, WNOHANG) == 0; ++i) usleep(10000);
    if (waitpid(pid_, &st, WNOHANG) == pid_ || kill(pid_, 0) != 0) {
      status = describe_status(st, namespaced_);
      pid_ = -1;
    }
  }
  stop();
  if (status.empty()) status = "closed its connection";
  std::string message = who_ + " " + (what.empty() ? status : what) + " during " + function;
  const std::string tail = log_tail();
  if (!tail.empty() && log_path_ != "/dev/null") message += "; the end of its output (" + log_path_ + "): " + tail;
  message += loader_hint(tail, limited_view_);
  throw LabFailure(message);
}

Reply LabProcess::call(const std::string& function, const Packet& args) {
  if (pid_ < 0) start();
  Packet request;
  request.put_string(function);
  request.put_bytes(args.bytes().data(), args.bytes().size());
  const int timeout_s = int(call_time_limit()) * call_time_factor_;
  // The call's time limit covers sending its inputs as well as the work and the reply.
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + std::chrono::seconds(timeout_s);
  // A call killed at its limit costs the check that made it; the runner is told how long it took,
  // the kill included, so that it does not cost the lab's later checks their time too.
  const auto killed = [&](const std::string& what) {
    try {
      fail(function, what);
    } catch (const LabFailure&) {
      tell_runner_of_killed_call(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      throw;
    }
  };
  bool sent = false;
  try {
    sent = write_frame(to_lab_, request, timeout_s * 1000);
  } catch (const std::runtime_error&) {
    killed("timed out after " + std::to_string(timeout_s) + " s (killed) before it read its inputs");
  }
  if (!sent) fail(function, "");
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  const int left_ms = int(std::max<long long>(left.count(), 0));
  // What a call returns is never much larger than what it was sent (outputs are at most a few
  // times the inputs), so a larger reply is refused before the grader allocates it: a lab
  // process cannot make the trusted grader hold a gigabyte.
  const std::size_t reply_limit = std::max<std::size_t>(std::size_t(64) << 20, 4 * request.bytes().size());
  Packet reply;
  try {
    if (!read_frame(from_lab_, reply, left_ms, reply_limit)) fail(function, "");
  } catch (const Malformed& e) {
    fail(function, std::string("sent a malformed reply (") + e.what() + ")");
  } catch (const LabFailure&) {
    throw;
  } catch (const std::runtime_error&) {
    killed("timed out after " + std::to_string(timeout_s) + " s (killed)");
  }
  Reply out;
  Status status;
  std::string message;
  try {
    status = reply.get<Status>();
    message = safe_text(reply.get_string(), 2000);
    const std::size_t n = reply.get_count(1);
    std::vector<std::uint8_t> results(n);
    reply.get_bytes(results.data(), n);
    out.results = Packet(std::move(results));
    const std::size_t counters = reply.get_count(16);
    for (std::size_t i = 0; i < counters; ++i) {
      const std::string name = reply.get_string(64);
      out.counters[name] = reply.get<std::uint64_t>();
    }
  } catch (const Malformed& e) {
    fail(function, std::string("sent a malformed reply (") + e.what() + ")");
  }
  switch (status) {
    case Status::ok: return out;
    case Status::bad_input: throw course::BadInput(message);
    case Status::not_implemented:
    case Status::error: throw LabError(message);
    case Status::error_unfit:
      // The process says it is unfit for another call (worker.hpp): a GPU lab's CUDA context
      // after an illegal address or a trap stays broken (the error is "sticky") and would fail
      // every later call, which would cost the lab every check after the one that found its bug.
      // So the process ends here, and the next call starts a fresh one. Not under a tool:
      // compute-sanitizer writes its report when the program ends by itself (finish()), and a
      // check run under it reads that report.
      // (COURSE_LAB_RESTART_AFTER_ERROR=0 keeps the process, for the test that shows what
      // that would cost: grader/lab1_softmax/partial/.)
      if (tool_.empty() && env_long("COURSE_LAB_RESTART_AFTER_ERROR", 1) != 0) {
        stop();
        note_in_log("[grader] " + function + " ended in an error: this lab process is ended, and the next call "
                    "starts a fresh one\n");
      }
      throw LabError(message);
    case Status::unknown_call: throw LabFailure(who_ + ": " + message);
  }
  fail(function, "sent an unknown status");
}

// The first child of a process, from /proc (0 if none).
static pid_t first_child(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child = 0;
  return in >> child ? child : 0;
}

// The lab's program itself: the grader's child, or in the sandbox the child of bubblewrap's
// init (bubblewrap -> its init, pid 1 of the new namespace -> the launcher, become the lab).
pid_t LabProcess::lab_pid() const {
  if (pid_ <= 0) return 0;
  if (!namespaced_) return pid_;
  if (lab_pid_ <= 0) {
    const pid_t init = first_child(pid_);
    lab_pid_ = init > 0 ? first_child(init) : 0;
  }
  return lab_pid_;
}

long LabProcess::peak_rss_bytes() const {
  if (pid_ <= 0) return 0;
  const pid_t pid = lab_pid();
  // A memory check must never pass for want of a reading.
  if (pid <= 0) throw std::runtime_error("the grader could not find the lab process in /proc to read its memory");
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long kb = 0;
  while (in >> key) {
    if (key == "VmHWM:") {
      in >> kb;
      return kb * 1024;
    }
  }
  throw std::runtime_error("the grader could not read the lab process's peak memory (VmHWM)");
}

double LabProcess::cpu_seconds() const {
  if (pid_ <= 0) return 0;
  const pid_t pid = lab_pid();
  if (pid <= 0) throw std::runtime_error("the grader could not find the lab process in /proc to read its CPU time");
  // The process's CPU-time clock: user and system time of all its threads, ended or not, in
  // nanoseconds (Linux lets any process read another's).
  clockid_t clock;
  timespec t{};
  if (clock_getcpuclockid(pid, &clock) == 0 && clock_gettime(clock, &t) == 0)
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  // Otherwise /proc/PID/stat: the 14th and 15th fields (after the name in parentheses, which may
  // hold spaces) are the same times in clock ticks (10 ms).
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) throw std::runtime_error("the grader could not read the lab process's CPU time");
  std::istringstream fields(text.substr(close + 2));
  std::string skip;
  for (int i = 3; i <= 13; ++i) fields >> skip;
  unsigned long long user = 0, system = 0;
  if (!(fields >> user >> system)) throw std::runtime_error("the grader could not read the lab process's CPU time");
  return double(user + system) / double(sysconf(_SC_CLK_TCK));
}

namespace {

LabProcess* lab_stand_in = nullptr;

// COURSE_LAB_TOOL (for debugging: "compute-sanitizer --tool initcheck"): the tool and its
// options, split at spaces, its name looked up in PATH; empty when unset or not found.
std::vector<std::string> lab_tool() {
  std::istringstream words(env_or("COURSE_LAB_TOOL", ""));
  std::vector<std::string> tool;
  for (std::string w; words >> w;) tool.push_back(w);
  if (tool.empty() || tool[0].find('/') != std::string::npos) return tool;
  std::istringstream path(env_or("PATH", ""));
  for (std::string dir; std::getline(path, dir, ':');)
    if (access((dir + "/" + tool[0]).c_str(), X_OK) == 0) {
      tool[0] = dir + "/" + tool[0];
      return tool;
    }
  // Grading without the tool that was asked for would look like a clean run under it.
  throw LabFailure("COURSE_LAB_TOOL names '" + tool[0] + "', which is not on PATH: give its full path (e.g. " +
                   "/usr/local/cuda/bin/compute-sanitizer)");
}

}  // namespace

LabProcess& lab() {
  static LabProcess p(env_or("COURSE_WORKER", ""), "your lab's code");
  // Every check's calls run under COURSE_LAB_TOOL where it is set; its report goes to the lab
  // process's log.
  static const bool under_tool = [] {
    std::vector<std::string> tool = lab_tool();
    if (!tool.empty()) p.run_under(std::move(tool), 20, p.log_path());
    return true;
  }();
  (void)under_tool;
  return lab_stand_in ? *lab_stand_in : p;
}

LabStandIn::LabStandIn(LabProcess& stand_in) : previous_(lab_stand_in) { lab_stand_in = &stand_in; }
LabStandIn::~LabStandIn() { lab_stand_in = previous_; }

LabProcess& solution_lab() {
  static LabProcess p(env_or("COURSE_SOLUTION_WORKER", ""), "the solution");
  return p;
}

std::string tool_folder_to_bind(const std::string& tool, const std::vector<std::string>& course) {
  if (tool.rfind("/usr/", 0) == 0) return "";  // bound already, with the rest of /usr
  const auto parent = [](const std::string& path) { return path.substr(0, path.rfind('/')); };
  const auto holds = [&course](const std::string& folder) {
    if (folder.size() <= 1) return true;  // "/" holds everything
    for (const std::string& path : course)
      if (is_within(path, folder)) return true;
    return false;
  };
  const std::string own = parent(tool), root = parent(own);
  // The toolkit's root, unless it holds the course (its build, its solutions): they would then be
  // in the lab's view. The tool's own folder, then, or nothing.
  if (!holds(root)) return root;
  if (!holds(own)) return own;
  return "";
}

std::string library_folder_to_bind(const std::string& folder, const std::vector<std::string>& course) {
  const std::string real = folder.empty() ? "" : real_path(folder);
  if (real.empty() || real == "/") return "";
  for (const char* system : kSystemFolders)
    if (is_within(real, system)) return "";  // bound already (sandbox_options), or allowed (FileRules)
  for (const std::string& path : course)
    if (is_within(path, real) || is_within(real, path)) return "";
  return real;
}

}  // namespace isolation
