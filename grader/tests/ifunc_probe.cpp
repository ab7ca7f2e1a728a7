// A program whose IFUNC resolver prints the process's seccomp mode (/proc/self/status). The
// dynamic loader runs the resolver while it relocates the program, before .preinit_array and
// every constructor: the earliest code a lab's program can run. Used by
// test_launcher_filter.sh to show that the launcher's filter already holds there.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace {

void probe_target() {}

// "ifunc resolver: Seccomp N" on standard output; plain system calls only.
void print_seccomp_mode() {
  char status[8192] = {};
  const int fd = ::open("/proc/self/status", O_RDONLY);
  const ssize_t n = fd >= 0 ? ::read(fd, status, sizeof status - 1) : -1;
  if (fd >= 0) ::close(fd);
  const char* line = n > 0 ? std::strstr(status, "\nSeccomp:") : nullptr;
  char out[64] = "ifunc resolver: Seccomp ?\n";
  if (line) {
    const char* value = line + std::strlen("\nSeccomp:");
    while (*value == ' ' || *value == '\t') ++value;
    out[24] = *value;  // the mode's one digit: 0 none, 1 strict, 2 filter
  }
  (void)!::write(1, out, std::strlen(out));
}

}  // namespace

extern "C" void (*resolve_probe())() {
  print_seccomp_mode();
  return probe_target;
}

void probe() __attribute__((ifunc("resolve_probe")));

int main() {
  probe();
  return 0;
}
