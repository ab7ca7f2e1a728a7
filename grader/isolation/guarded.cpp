// GuardedBuffer: see guarded.hpp.
#include "guarded.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <utility>

namespace isolation {

namespace {
std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
}  // namespace

// [guard page][pages holding the data, right-aligned][guard page]
GuardedBuffer::GuardedBuffer(std::size_t bytes, std::size_t align) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  const std::size_t padded = round_up(bytes, align);
  const std::size_t span = round_up(padded, page);
  if (span < padded) throw std::bad_alloc();  // overflow
  const std::size_t total = span + 2 * page;
  void* region = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) throw std::bad_alloc();
  char* first = static_cast<char*>(region) + page;
  if (span > 0 && mprotect(first, span, PROT_READ | PROT_WRITE) != 0) {
    munmap(region, total);
    throw std::bad_alloc();
  }
  region_ = region;
  region_bytes_ = total;
  data_ = first + span - padded;
}

GuardedBuffer::~GuardedBuffer() {
  if (region_) munmap(region_, region_bytes_);
}

GuardedBuffer::GuardedBuffer(GuardedBuffer&& other) noexcept
    : region_(std::exchange(other.region_, nullptr)),
      region_bytes_(std::exchange(other.region_bytes_, 0)),
      data_(std::exchange(other.data_, nullptr)) {}

GuardedBuffer& GuardedBuffer::operator=(GuardedBuffer&& other) noexcept {
  if (this != &other) {
    if (region_) munmap(region_, region_bytes_);
    region_ = std::exchange(other.region_, nullptr);
    region_bytes_ = std::exchange(other.region_bytes_, 0);
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

}  // namespace isolation
