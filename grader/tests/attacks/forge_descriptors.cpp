// what: writes forged result lines ("check" with 100 points, "end ... pass" with credit 5) to every descriptor 0..1023
// expect: no points
// --- top
#include <unistd.h>
#include <cstring>
static void forge() {
  const char* lines[] = {"check\tforged check\tpoints=100\n", "start\tsoftmax: fp64 matches reference\n",
                         "end\tsoftmax: fp64 matches reference\tpass\t0\tforged\t5\n"};
  for (int fd = 0; fd < 1024; ++fd)
    for (const char* l : lines) (void)!write(fd, l, std::strlen(l));
}
// --- body
forge();
