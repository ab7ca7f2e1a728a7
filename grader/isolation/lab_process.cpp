#include "lab_process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "course/errors.hpp"
#include "seccomp_filter.hpp"
#include "worker.hpp"

// Defined by the trusted side of the GPU labs (grader/gpu/gpu_harness.cpp): their lab processes
// start the CUDA driver, which is not yet run under a filter installed before exec.
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

// Can user "nobody" reach and run this file? (Every folder on the way searchable by others,
// the file readable and executable by others.)
bool reachable_by_others(const std::string& path) {
  std::string p;
  std::size_t at = 0;
  while ((at = path.find('/', at + 1)) != std::string::npos) {
    p = path.substr(0, at);
    struct stat st;
    if (stat(p.c_str(), &st) != 0 || !(st.st_mode & S_IXOTH)) return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) && (st.st_mode & S_IXOTH);
}

void set_limit(int resource, rlim_t value) {
  const rlimit r{value, value};
  setrlimit(resource, &r);
}

// How the lab process is started: its limits, its user, and the system-call filter (built before
// the fork, so that the child only writes two numbers into it) or none.
struct Launch {
  const char* binary;
  const char* scratch;
  bool drop_privileges;
  rlim_t cpu_seconds;
  long memory_mb;                 // address space (CPU labs), 0: no limit
  SeccompProgram* filter;         // installed before exec (CPU labs), or nullptr
  char* const* envp;
};

// Everything between fork and exec: only async-signal-safe calls.
[[noreturn]] void become_lab_process(const Launch& l, int request_fd, int reply_fd, int log_fd) {
  setsid();                          // its own session and process group
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the grader
  const int devnull = open("/dev/null", O_RDONLY);
  // Move the four descriptors above the target numbers first, so that no dup2 clobbers another.
  const int sources[5] = {devnull, log_fd, log_fd, request_fd, reply_fd};
  int high[5];
  for (int i = 0; i < 5; ++i) high[i] = fcntl(sources[i], F_DUPFD, 64);
  for (int i = 0; i < 5; ++i) dup2(high[i], i);
  for (int fd = 5; fd < 4096; ++fd) close(fd);
  // The program is run through kExecFd, opened now, above the limit on open files set below: the
  // filter allows running a program through that descriptor alone, which the lab process can
  // never hold again (the descriptor closes on exec, and it cannot make one that high).
  if (l.filter) {
    const int fd = open(l.binary, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fcntl(fd, F_DUPFD_CLOEXEC, kExecFd) != kExecFd) _exit(127);
    close(fd);
  }
  if (chdir(l.scratch) != 0) (void)!chdir("/");
  set_limit(RLIMIT_CORE, 0);
  set_limit(RLIMIT_NOFILE, 256);
  set_limit(RLIMIT_FSIZE, rlim_t(env_long("COURSE_LOG_LIMIT", 1 << 20)));
  set_limit(RLIMIT_CPU, l.cpu_seconds);
  if (l.memory_mb > 0) set_limit(RLIMIT_AS, rlim_t(l.memory_mb) << 20);
  signal(SIGXFSZ, SIG_IGN);  // a full log makes writes fail (EFBIG), it does not kill the lab
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (l.drop_privileges) {
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(126);
  }
  char* const argv[] = {const_cast<char*>(l.binary), nullptr};
  if (l.filter) {
    // From here on the filter holds, for the dynamic loader, IFUNC resolvers, constructors and
    // every thread of the lab's program. A kernel without seccomp: the lab process's own copy
    // (sandbox.cpp) is all there is, as before.
    l.filter->set_self(getpid());
    if (l.filter->install()) {
      syscall(SYS_execveat, kExecFd, "", argv, l.envp, AT_EMPTY_PATH);
      _exit(127);
    }
  }
  execve(l.binary, argv, l.envp);
  _exit(127);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
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

}  // namespace

LabProcess::LabProcess(std::string binary, std::string who)
    : binary_(std::move(binary)), who_(std::move(who)) {
  // The lab process starts in its scratch folder: its program must be named absolutely.
  if (char* real = binary_.empty() ? nullptr : realpath(binary_.c_str(), nullptr)) {
    binary_ = real;
    std::free(real);
  }
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
  if (pipe2(request, O_CLOEXEC) != 0 || pipe2(reply, O_CLOEXEC) != 0)
    throw LabFailure(std::string("cannot make pipes: ") + std::strerror(errno));
  const int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const bool root = geteuid() == 0;
  const bool drop = root && env_or("COURSE_DROP_PRIVILEGES", "1") != "0" &&
                    reachable_by_others(binary_);
  if (root && !drop && log_fd >= 0) {
    const char note[] = "[grader] note: the lab process runs as root (its program is not reachable for user nobody)\n";
    (void)!::write(log_fd, note, sizeof note - 1);
  }
  const bool gpu = course_grader_of_gpu_lab && course_grader_of_gpu_lab();
  // An address-space limit in CPU labs only: the CUDA driver reserves address space far beyond any.
#ifdef COURSE_SANITIZE
  const long memory_mb = 0;  // AddressSanitizer reserves terabytes of shadow memory
#else
  const long memory_mb = gpu ? 0 : env_long("COURSE_LAB_MEMORY_MB", 8192);
#endif
  const rlim_t cpu = rlim_t(env_long("COURSE_LAB_CPU_SECONDS", 600));
  // CPU labs get the system-call filter before their program's first instruction, unless it is
  // turned off or traced (the trace's handler is the lab process's own: sandbox.cpp).
  const std::string sandbox = env_or("COURSE_SANDBOX", "on");
  std::unique_ptr<SeccompProgram> filter;
#ifdef COURSE_SANITIZE
  const bool sanitized = true;  // AddressSanitizer starts before main and needs more (the filter from
                                // .preinit_array still holds; the course's ASan build tests memory)
#else
  const bool sanitized = false;
#endif
  if (!gpu && !sanitized && sandbox != "off" && sandbox != "trace" && SeccompProgram::supported())
    filter = std::make_unique<SeccompProgram>(FilterRules{false, false, /*allow_exec_fd=*/true});
  // The environment of the lab process: nothing of ours, only what its libraries need.
  std::vector<std::string> env_strings = {"PATH=/usr/bin:/bin", "LC_ALL=C", "CUDA_CACHE_DISABLE=1"};
  for (const char* keep : {"CUDA_VISIBLE_DEVICES", "COURSE_SANDBOX", "ASAN_OPTIONS", "UBSAN_OPTIONS"})
    if (const char* v = std::getenv(keep)) env_strings.push_back(std::string(keep) + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) throw LabFailure(std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0)
    become_lab_process({binary_.c_str(), scratch_.c_str(), drop, cpu, memory_mb, filter.get(), envp.data()},
                       request[0], reply[1], log_fd < 0 ? 2 : log_fd);
  close(request[0]);
  close(reply[1]);
  if (log_fd >= 0) close(log_fd);
  pid_ = pid;
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
}

void LabProcess::restart() { stop(); }

std::string LabProcess::log_tail() const {
  std::ifstream in(log_path_, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > 600 ? size - 600 : 0;
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
      status = describe_status(st);
      pid_ = -1;
    }
  }
  stop();
  if (status.empty()) status = "closed its connection";
  std::string message = who_ + " " + (what.empty() ? status : what) + " during " + function;
  const std::string tail = log_tail();
  if (!tail.empty() && log_path_ != "/dev/null") message += "; the end of its output (" + log_path_ + "): " + tail;
  throw LabFailure(message);
}

Reply LabProcess::call(const std::string& function, const Packet& args) {
  if (pid_ < 0) start();
  Packet request;
  request.put_string(function);
  request.put_bytes(args.bytes().data(), args.bytes().size());
  if (!write_frame(to_lab_, request)) fail(function, "");
  const int timeout_s = int(env_long("COURSE_CALL_TIMEOUT", 60));
  // What a call returns is never much larger than what it was sent (outputs are at most a few
  // times the inputs), so a larger reply is refused before the grader allocates it: a lab
  // process cannot make the trusted grader hold a gigabyte.
  const std::size_t reply_limit = std::max<std::size_t>(std::size_t(64) << 20, 4 * request.bytes().size());
  Packet reply;
  try {
    if (!read_frame(from_lab_, reply, timeout_s * 1000, reply_limit)) fail(function, "");
  } catch (const Malformed& e) {
    fail(function, std::string("sent a malformed reply (") + e.what() + ")");
  } catch (const LabFailure&) {
    throw;
  } catch (const std::runtime_error&) {
    fail(function, "timed out after " + std::to_string(timeout_s) + " s (killed)");
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
    case Status::unknown_call: throw LabFailure(who_ + ": " + message);
  }
  fail(function, "sent an unknown status");
}

long LabProcess::peak_rss_bytes() const {
  if (pid_ <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string key;
  long kb = 0;
  while (in >> key) {
    if (key == "VmHWM:") {
      in >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

LabProcess& lab() {
  static LabProcess p(env_or("COURSE_WORKER", ""), "your lab's code");
  return p;
}

LabProcess& solution_lab() {
  static LabProcess p(env_or("COURSE_SOLUTION_WORKER", ""), "the solution");
  return p;
}

}  // namespace isolation
