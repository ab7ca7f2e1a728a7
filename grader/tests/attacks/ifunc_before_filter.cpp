// what: an IFUNC resolver, which the dynamic loader runs while it relocates the program (before .preinit_array and every constructor), writes a file: proof of code outside the system-call filter
// expect: no points
// marker: @MARKER@
// --- top
#include <fcntl.h>
#include <unistd.h>
namespace course::lab1 {
static void probe_target() {}
extern "C" {
static void (*resolve_probe())() {
  const int fd = ::open("@MARKER@", O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd >= 0) {
    (void)!::write(fd, "ran outside the filter\n", 23);
    ::close(fd);
  }
  return probe_target;
}
}
void probe() __attribute__((ifunc("resolve_probe")));
}  // namespace course::lab1
// --- body
probe();
