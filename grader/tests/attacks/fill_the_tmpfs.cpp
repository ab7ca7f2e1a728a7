// what: writes files of 1 MiB into /tmp, /dev/shm and /dev until refused (at most 512 MiB in each, so that a run without the limits harms no machine), then names how much each took: a tmpfs is memory that no limit of the lab process counts, so unsized it would let a lab take the machine's memory from its neighbours. A CPU lab may write no file at all (its filter); grader.attack.fill_the_tmpfs.sized_under_a_tool runs it without the filter, as a GPU lab's writes are
// expect: no points
// message: before it could write no more
// --- top
#include <fcntl.h>
#include <unistd.h>
#include <stdexcept>
#include <string>
#include <vector>
static int mib_written_into(const std::string& folder, int most_mib) {
  const std::vector<char> mib(1 << 20, 'x');
  int written = 0;
  for (; written < most_mib; ++written) {
    const std::string path = folder + "/fill-" + std::to_string(written);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) break;
    const bool whole = write(fd, mib.data(), mib.size()) == ssize_t(mib.size());
    close(fd);
    if (!whole) break;
  }
  return written;
}
// --- body
constexpr int kMost = 512;
const int tmp = mib_written_into("/tmp", kMost), shm = mib_written_into("/dev/shm", kMost),
          dev = mib_written_into("/dev", kMost);
const std::string wrote = "the lab process wrote " + std::to_string(tmp) + " MiB into /tmp, " + std::to_string(shm) +
                          " into /dev/shm and " + std::to_string(dev) + " into /dev";
if (tmp < kMost && shm < kMost && dev < kMost) throw std::runtime_error(wrote + " before it could write no more");
throw std::runtime_error(wrote + ": no limit held");
