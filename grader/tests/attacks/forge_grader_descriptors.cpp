// what: opens the grader's descriptors through /proc/<parent>/fd/N and writes forged results there
// expect: no points
// --- top
#include <fcntl.h>
#include <unistd.h>
#include <cstring>
#include <string>
static void forge() {
  const char* line = "end\tsoftmax: fp64 matches reference\tpass\t0\tforged\t1\n";
  for (int fd = 0; fd < 64; ++fd) {
    const std::string path = "/proc/" + std::to_string(getppid()) + "/fd/" + std::to_string(fd);
    const int f = open(path.c_str(), O_WRONLY | O_APPEND);
    if (f >= 0) (void)!write(f, line, std::strlen(line));
  }
}
// --- body
forge();
