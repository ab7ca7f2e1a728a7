// The file-system rules of a lab process without namespaces (file_rules.hpp), path by path: a
// child applies them and tries what a hostile lab would (each must fail) and what a lab needs
// (each must work); the parent reports. Before that, which device files are a GPU's, and
// paths_beside on a tree of its own, where the course lies two folders down. With
// COURSE_FILE_RULES_TEST=unapplied the child applies nothing: the test must then fail, which shows
// that its checks can.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "file_rules.hpp"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}
bool opens(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  close(fd);
  return true;
}
void allowed(const std::string& path, int flags, const char* what) { expect(opens(path, flags), std::string("allowed: ") + what); }
void refused(const std::string& path, int flags, const char* what) {
  expect(!opens(path, flags) && errno == EACCES, std::string("refused: ") + what);
}

void write_file(const std::string& path, const char* text) { std::ofstream(path) << text; }

// The checks, in a child under the rules for `program`, where `course` is the course's tree
// (made by main: a solution in it), `elsewhere` a folder beside it, and `library` a file in a
// folder of libraries that the rules were given or not (`given`).
int run_checks(const std::string& program, const std::string& course, const std::string& elsewhere,
               const std::string& library, bool given) {
  if (given) {
    allowed(library, O_RDONLY, "a library in the folder of libraries it was given");
    refused(library, O_WRONLY, "a library in that folder, written (read-only there)");
  } else {
    refused(library, O_RDONLY, "a library in a folder of libraries it was not given");
  }
  allowed(program, O_RDONLY, "its own program");
  allowed("/usr/bin/env", O_RDONLY, "a file beneath /usr");
  allowed("/etc/ld.so.cache", O_RDONLY, "/etc/ld.so.cache");
  allowed("/proc/self/status", O_RDONLY, "/proc/self/status");
  allowed("/dev/null", O_WRONLY | O_TRUNC, "/dev/null, written");
  allowed("/dev/urandom", O_RDONLY, "/dev/urandom");
  refused(course + "/solutions/answer.cpp", O_RDONLY, "the course's solution");
  refused(course, O_RDONLY | O_DIRECTORY, "the course's folder, listed");
  refused(elsewhere + "/notes.txt", O_RDONLY, "a file outside the system's folders");
  refused(elsewhere + "/made.txt", O_WRONLY | O_CREAT, "a file made outside them");
  refused("/etc/passwd", O_RDONLY, "/etc/passwd (of /etc, only ld.so.cache)");
  refused("/usr/made-by-a-lab", O_WRONLY | O_CREAT, "a file made beneath /usr (read-only there)");
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  const char* mode = std::getenv("COURSE_FILE_RULES_TEST");
  const bool unapplied = mode && std::strcmp(mode, "unapplied") == 0;
  char top[] = "/tmp/course-file-rules-XXXXXX";
  if (!mkdtemp(top)) {
    std::printf("FAIL no scratch folder\n");
    return 1;
  }
  const std::string root = top, course = root + "/a/course", elsewhere = root + "/a/elsewhere";
  for (const std::string& d : {root + "/a", course, course + "/solutions", elsewhere, root + "/b"}) mkdir(d.c_str(), 0755);
  write_file(course + "/solutions/answer.cpp", "the answer\n");
  write_file(elsewhere + "/notes.txt", "notes\n");
  const std::string library = root + "/b/libruntime.so";
  write_file(library, "a library\n");

  // The device files a GPU lab's sandbox holds: NVIDIA's, and WSL 2's dxg; no other.
  for (const char* gpu_file : {"nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps", "dxg"})
    expect(isolation::is_gpu_device_file(gpu_file), std::string("a GPU's device file: /dev/") + gpu_file);
  for (const char* other : {"null", "dri", "fb0", "dxgkrnl", "mem", "shm"})
    expect(!isolation::is_gpu_device_file(other), std::string("not a GPU's device file: /dev/") + other);

  // paths_beside: the course's folder is left out, everything beside it kept.
  std::vector<std::string> beside = isolation::paths_beside(root, {course});
  std::sort(beside.begin(), beside.end());
  const std::vector<std::string> want = {elsewhere, root + "/b"};
  expect(beside == want, "paths_beside: the course's siblings and its parent's, not the course");
  expect(isolation::paths_beside(course + "/solutions", {course}).empty(), "paths_beside: nothing inside the course");
  expect(isolation::paths_beside(root + "/b", {course}) == std::vector<std::string>{root + "/b"},
         "paths_beside: a folder that holds no course path, whole");

  const std::string program = argv[0];
  bool skipped = false;
  // A CPU lab's rules, then a GPU lab's given a folder of libraries (the CUDA runtime's).
  for (const bool given : {false, true}) {
    const std::vector<std::string> libraries = given ? std::vector<std::string>{root + "/b"} : std::vector<std::string>{};
    isolation::FileRules rules(program, /*gpu=*/given, {course}, libraries);
    if (!rules.ready()) {
      std::printf("SKIPPED: this kernel has no Landlock (the rules' own checks are not run)\n");
      skipped = true;
      break;
    }
    std::printf("-- %s\n", given ? "a GPU lab's rules, with a folder of libraries" : "a CPU lab's rules");
    const pid_t child = fork();
    if (child == 0) {
      if (!unapplied && !isolation::FileRules::apply(rules.fd())) {
        std::printf("FAIL the rules could not be applied\n");
        _exit(1);
      }
      _exit(run_checks(program, course, elsewhere, library, given) == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  const std::string made = elsewhere + "/made.txt";
  unlink(made.c_str());
  unlink("/usr/made-by-a-lab");
  std::system(("rm -rf '" + root + "'").c_str());
  if (failures) {
    std::printf("a lab process's file rules are not as they should be\n");
    return 1;
  }
  std::printf("the file rules allow and refuse what they should\n");
  return skipped ? 77 : 0;
}
