#include "process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

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

// A grader's queue for its share of the GPU (grader/common/gpu_share.hpp), from the complete
// lines of `channel` after `scanned`, which it advances: "waiting" when a check starts to wait,
// "waited\t<seconds>" when it has the GPU. Time in the queue is not the lab's: while a wait is
// open the caller's clock stops, and the seconds waited are added to its limit.
struct GpuQueue {
  bool waiting = false;
  double waited = 0;  // seconds reported since the caller last took them
};

void read_gpu_queue(const std::string& channel, std::size_t& scanned, GpuQueue& queue) {
  for (std::size_t end; (end = channel.find('\n', scanned)) != std::string::npos; scanned = end + 1) {
    if (channel.compare(scanned, end - scanned, "waiting") == 0) queue.waiting = true;
    if (channel.compare(scanned, 7, "waited\t") == 0) {
      queue.waiting = false;
      queue.waited += std::atof(channel.c_str() + scanned + 7);
    }
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
  std::size_t scanned = 0;  // how much of the channel read_gpu_queue has read
  GpuQueue queue;
  while (true) {
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) exited = true, exited_at = out.seconds;
    // Done when the grader has exited and its pipe is drained (or held open by a leftover
    // process for more than two seconds: that one is killed below).
    if (exited && (!open_channel || out.seconds - exited_at > 2)) break;
    if (out.seconds > timeout_s && !queue.waiting) {
      out.timed_out = true;
      break;
    }
    if (open_channel) {
      pollfd p{channel[0], POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        const ssize_t n = read(channel[0], buf, sizeof buf);
        if (n > 0 && out.channel.size() < kMaxChannelBytes) out.channel.append(buf, std::size_t(n));
        if (n == 0) open_channel = false;  // every writer is gone
        read_gpu_queue(out.channel, scanned, queue);
        // A wait's end cannot come on a closed channel, nor be seen past the cap (the channel is
        // not kept): the clock runs again.
        if (n <= 0 || out.channel.size() >= kMaxChannelBytes) queue.waiting = false;
        timeout_s += queue.waited;
        queue.waited = 0;
      }
    } else {
      usleep(20000);
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
