#include "process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "wire.hpp"

namespace runner {

namespace {

constexpr std::size_t kMaxChannelBytes = 16u << 20;

// Kills every process whose parent is the runner, except `keep`, and reaps what has exited.
// With the runner a subreaper, that includes anything a grader's descendants left behind.
void kill_orphans() {
  for (int round = 0; round < 3; ++round) {
    DIR* proc = opendir("/proc");
    if (!proc) return;
    bool any = false;
    while (dirent* e = readdir(proc)) {
      const pid_t pid = std::atoi(e->d_name);
      if (pid <= 0) continue;
      std::ifstream status(std::string("/proc/") + e->d_name + "/status");
      std::string key;
      long ppid = -1;
      while (status >> key)
        if (key == "PPid:") {
          status >> ppid;
          break;
        }
      if (ppid == getpid()) {
        kill(pid, SIGKILL);
        any = true;
      }
    }
    closedir(proc);
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (!any) return;
    usleep(20000);
  }
}

// What a grader says about the lab's clock, from the complete lines of `channel` after `scanned`,
// which it advances. Time that is not the lab's own does not count against its time limit:
//  - its queue for its share of the GPU (grader/common/gpu_share.hpp): "waiting" when a check
//    starts to wait, "waited\t<seconds>" when it has the GPU. While a wait is open the caller's
//    clock stops, and the seconds waited are added to its limit;
//  - a call of the lab killed at its own time limit (isolation::kKilledCallLine): its check has
//    failed for it, and its seconds are added to the limit, up to a cap (run_grader), so that a
//    function that hangs costs the checks that call it, not every check after them.
struct LabClock {
  bool waiting = false;
  double waited = 0;  // seconds in the GPU's queue reported since the caller last took them
  double killed = 0;  // seconds in killed calls, likewise
};

// The seconds on a line after its tag and a tab: never negative, never infinite or NaN.
double seconds_after(const std::string& channel, std::size_t at) {
  const double s = std::atof(channel.c_str() + at);
  return std::isfinite(s) && s > 0 ? s : 0;
}

void read_lab_clock(const std::string& channel, std::size_t& scanned, LabClock& clock) {
  const std::string killed_tag = std::string(isolation::kKilledCallLine) + '\t';
  for (std::size_t end; (end = channel.find('\n', scanned)) != std::string::npos; scanned = end + 1) {
    if (channel.compare(scanned, end - scanned, "waiting") == 0) clock.waiting = true;
    if (channel.compare(scanned, 7, "waited\t") == 0) {
      clock.waiting = false;
      clock.waited += seconds_after(channel, scanned + 7);
    }
    if (channel.compare(scanned, killed_tag.size(), killed_tag) == 0)
      clock.killed += seconds_after(channel, scanned + killed_tag.size());
  }
}

}  // namespace

void become_subreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

ProcessOutcome run_grader(const std::vector<std::string>& argv, const std::string& log_path,
                          const std::vector<std::string>& env, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  int channel[2];
  if (pipe2(channel, O_CLOEXEC) != 0) {
    std::perror("pipe");
    std::exit(2);
  }
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // its own process group, so a timeout kills everything it started
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
    }
    dup2(channel[1], 3);  // dup2 clears close-on-exec on descriptor 3
    unsetenv("COURSE_GPU_LOCK");  // only the graders of GPU labs get it (in `env`)
    for (const auto& kv : env) putenv(strdup(kv.c_str()));
    putenv(strdup("COURSE_RESULTS_FD=3"));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::perror(("cannot run " + argv[0]).c_str());
    _exit(127);
  }
  close(channel[1]);
  ProcessOutcome out;
  bool open_channel = true;
  int status = 0;
  bool exited = false;
  double exited_at = 0;
  char buf[65536];
  std::size_t scanned = 0;  // how much of the channel read_lab_clock has read
  LabClock clock;
  // Killed calls lengthen the limit by at most the limit itself: a lab that hangs in every check
  // still ends, at about twice its limit. (A call still hanging when the limit runs out is not
  // waited for: the lab has then spent its limit on other work or past the cap.)
  const double most_killed_s = timeout_s;
  while (true) {
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) exited = true, exited_at = out.seconds;
    // Done when the grader has exited and its pipe is drained (or held open by a leftover
    // process for more than two seconds: that one is killed below).
    if (exited && (!open_channel || out.seconds - exited_at > 2)) break;
    if (open_channel) {
      pollfd p{channel[0], POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        const ssize_t n = read(channel[0], buf, sizeof buf);
        if (n > 0 && out.channel.size() < kMaxChannelBytes) out.channel.append(buf, std::size_t(n));
        if (n == 0) open_channel = false;  // every writer is gone
        read_lab_clock(out.channel, scanned, clock);
        // A wait's end cannot come on a closed channel, nor be seen past the cap (the channel is
        // not kept): the clock runs again.
        if (n <= 0 || out.channel.size() >= kMaxChannelBytes) clock.waiting = false;
        timeout_s += clock.waited;
        const double killed = std::min(clock.killed, most_killed_s - out.killed_calls_s);
        out.killed_calls_s += killed;
        timeout_s += killed;
        clock.waited = clock.killed = 0;
      }
    } else {
      usleep(20000);
    }
    // After the read: a call's kill reported just as the limit runs out still counts.
    if (out.seconds > timeout_s && !clock.waiting) {
      out.timed_out = true;
      break;
    }
  }
  close(channel[0]);
  kill(-pid, SIGKILL);
  if (!exited) waitpid(pid, &status, 0);
  kill_orphans();
  if (out.timed_out) return out;
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  return out;
}

}  // namespace runner
