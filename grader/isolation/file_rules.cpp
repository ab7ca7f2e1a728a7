#include "file_rules.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__linux__) && __has_include(<linux/landlock.h>) && defined(SYS_landlock_create_ruleset)
#include <linux/landlock.h>
#define COURSE_HAVE_LANDLOCK 1
#endif

namespace isolation {

std::string real_path(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (!real) return "";
  std::string r = real;
  std::free(real);
  return r;
}

namespace {

void collect(const std::string& path, const std::vector<std::string>& course, std::vector<std::string>& out) {
  // Its real path: a symbolic link (/lib -> usr/lib, or one into the course) is judged by where it leads.
  const std::string real = real_path(path);
  if (real.empty()) return;
  bool holds = false;
  for (const std::string& c : course) {
    if (is_within(real, c)) return;  // the course's own folder, or inside it
    if (is_within(c, real)) holds = true;
  }
  if (!holds) {
    out.push_back(real);
    return;
  }
  DIR* dir = opendir(real.c_str());
  if (!dir) return;
  while (const dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    collect((real == "/" ? "" : real) + "/" + e->d_name, course, out);
  }
  closedir(dir);
}

}  // namespace

bool is_gpu_device_file(const std::string& name) { return name.rfind("nvidia", 0) == 0 || name == "dxg"; }

bool is_within(const std::string& path, const std::string& folder) {
  return folder == "/" || path == folder || path.rfind(folder + "/", 0) == 0;
}

std::vector<std::string> paths_beside(const std::string& folder, const std::vector<std::string>& course) {
  std::vector<std::string> real_course;
  for (const std::string& c : course)
    if (std::string r = real_path(c); !r.empty()) real_course.push_back(r);
  std::vector<std::string> out;
  collect(folder, real_course, out);
  return out;
}

#ifdef COURSE_HAVE_LANDLOCK

namespace {

// What the rules decide: every right of Landlock's first three versions on files and folders (to
// read, write, run, make, remove and rename; to truncate from version 3). Rights this kernel's
// version does not know are left out, and stay allowed. Device ioctls (version 5) are not handled:
// the CUDA driver works through them.
std::uint64_t handled_rights(int abi) {
  std::uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // version 1: execute .. make_sym
#ifdef LANDLOCK_ACCESS_FS_REFER
  if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
  if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
  return r;
}

constexpr std::uint64_t kRead = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_EXECUTE;
constexpr std::uint64_t kReadFolder = kRead | LANDLOCK_ACCESS_FS_READ_DIR;
// A device file's: read, write, and open with O_TRUNC (an ofstream of /dev/null does).
constexpr std::uint64_t kDevice = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
                                  | LANDLOCK_ACCESS_FS_TRUNCATE
#endif
    ;
// The rights Landlock accepts in a rule on a file, not a folder.
constexpr std::uint64_t kFileRights = kDevice | LANDLOCK_ACCESS_FS_EXECUTE;

// A rule: `rights` beneath `path` (a folder) or on it (a file; rights on folders dropped). A
// path that does not exist here is skipped.
void allow(int ruleset, const std::string& path, std::uint64_t rights, std::uint64_t handled) {
  const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (fstat(fd, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) rights &= kFileRights;
    landlock_path_beneath_attr rule{};
    rule.allowed_access = rights & handled;
    rule.parent_fd = fd;
    (void)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
  }
  close(fd);
}

// A new ruleset that decides `handled` (this kernel's rights), or -1 without Landlock.
int new_ruleset(std::uint64_t& handled) {
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) return -1;
  handled = handled_rights(int(abi));
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  return int(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
}

}  // namespace

int build_rules(const std::vector<std::string>& hidden, const std::vector<std::string>& readable,
                const std::vector<std::string>& writable) {
  std::uint64_t handled = 0;
  const int ruleset = new_ruleset(handled);
  if (ruleset < 0) return -1;
  for (const std::string& path : paths_beside("/", hidden)) allow(ruleset, path, kReadFolder, handled);
  for (const std::string& path : readable) allow(ruleset, path, kReadFolder, handled);
  for (const std::string& path : writable) allow(ruleset, path, handled, handled);
  allow(ruleset, "/dev/null", kDevice, handled);
  return ruleset;
}

FileRules::FileRules(const std::string& program, bool gpu, const std::vector<std::string>& course,
                     const std::vector<std::string>& libraries) {
  std::uint64_t handled = 0;
  const int ruleset = new_ruleset(handled);
  if (ruleset < 0) return;
  // The system's programs and libraries (as bubblewrap's sandbox binds them), never the course.
  for (const char* top : kSystemFolders)
    for (const std::string& path : paths_beside(top, course)) allow(ruleset, path, kReadFolder, handled);
  allow(ruleset, "/etc/ld.so.cache", kRead, handled);
  // A GPU lab's CUDA driver names its threads (/proc/self/task/ID/comm, opened O_WRONLY | O_CREAT
  // | O_TRUNC); writing /proc is then as open to it as without these rules (its files' modes decide).
  allow(ruleset, "/proc", gpu ? kReadFolder | kDevice : kReadFolder, handled);
  if (gpu) allow(ruleset, "/sys", kReadFolder, handled);
  for (const char* dev : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"})
    allow(ruleset, dev, kDevice, handled);
  if (gpu) {
    if (DIR* dev = opendir("/dev")) {
      while (const dirent* e = readdir(dev))
        if (is_gpu_device_file(e->d_name))
          allow(ruleset, std::string("/dev/") + e->d_name, kDevice | LANDLOCK_ACCESS_FS_READ_DIR, handled);
      closedir(dev);
    }
  }
  for (const std::string& folder : libraries) allow(ruleset, folder, kReadFolder, handled);
  allow(ruleset, program, kRead, handled);
  // Above 63: the child moves its five descriptors to 0-4 through numbers from 64 up.
  fd_ = fcntl(ruleset, F_DUPFD_CLOEXEC, 64);
  close(ruleset);
}

FileRules::~FileRules() {
  if (fd_ >= 0) close(fd_);
}

bool FileRules::apply(int fd) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return syscall(SYS_landlock_restrict_self, fd, 0) == 0;
}

#else

int build_rules(const std::vector<std::string>&, const std::vector<std::string>&, const std::vector<std::string>&) {
  return -1;
}
FileRules::FileRules(const std::string&, bool, const std::vector<std::string>&, const std::vector<std::string>&) {}
FileRules::~FileRules() {}
bool FileRules::apply(int) { return false; }

#endif

}  // namespace isolation
