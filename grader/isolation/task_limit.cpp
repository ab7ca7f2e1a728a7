#include "task_limit.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace isolation {

namespace {

// The real user and thread count of process `pid`, from /proc/PID/status; false if it ended.
bool read_status(const char* pid, uid_t& real_uid, long& threads) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%s/status", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  bool have_uid = false, have_threads = false;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long value = 0;
    if (std::sscanf(line, "Uid: %lu", &value) == 1) real_uid = uid_t(value), have_uid = true;
    if (std::sscanf(line, "Threads: %lu", &value) == 1) threads = long(value), have_threads = true;
  }
  std::fclose(f);
  return have_uid && have_threads;
}

}  // namespace

long tasks_of_user(uid_t uid) {
  DIR* proc = opendir("/proc");
  if (!proc) return 0;
  long tasks = 0;
  while (const dirent* e = readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    uid_t real_uid = 0;
    long threads = 0;
    if (read_status(e->d_name, real_uid, threads) && real_uid == uid) tasks += threads;
  }
  closedir(proc);
  return tasks;
}

bool limit_tasks_of_this_user(long allowance) {
  if (allowance <= 0) return true;
  const rlim_t most = rlim_t(tasks_of_user(getuid()) + allowance);
  const rlimit r{most, most};
  return setrlimit(RLIMIT_NPROC, &r) == 0;
}

}  // namespace isolation
