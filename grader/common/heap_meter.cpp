#include "heap_meter.hpp"

#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstddef>
#include <cstdlib>

#ifndef COURSE_NO_HEAP_METER  // sanitizer builds bring their own malloc: no meter there

// glibc's own allocator entry points: we forward to them and only keep count.
extern "C" {
void* __libc_malloc(std::size_t);
void __libc_free(void*);
void* __libc_realloc(void*, std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
}

namespace {
std::atomic<int> g_meters{0};
std::atomic<long> g_current{0};
std::atomic<long> g_peak{0};
std::atomic<bool> g_interposed{false};

void on_alloc(void* p) {
  g_interposed.store(true, std::memory_order_relaxed);
  if (!p || g_meters.load(std::memory_order_relaxed) == 0) return;
  const long now = g_current.fetch_add(long(malloc_usable_size(p))) + long(malloc_usable_size(p));
  long peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
void on_free(void* p) {
  if (!p || g_meters.load(std::memory_order_relaxed) == 0) return;
  g_current.fetch_sub(long(malloc_usable_size(p)));
}
}  // namespace

extern "C" {
void* malloc(std::size_t n) {
  void* p = __libc_malloc(n);
  on_alloc(p);
  return p;
}
void free(void* p) {
  on_free(p);
  __libc_free(p);
}
void* calloc(std::size_t n, std::size_t size) {
  void* p = __libc_calloc(n, size);
  on_alloc(p);
  return p;
}
void* realloc(void* old, std::size_t n) {
  on_free(old);
  void* p = __libc_realloc(old, n);
  on_alloc(p ? p : (n ? nullptr : p));
  if (!p && n && old) on_alloc(old);  // realloc failed: the old block is still held
  return p;
}
void* memalign(std::size_t align, std::size_t n) {
  void* p = __libc_memalign(align, n);
  on_alloc(p);
  return p;
}
void* aligned_alloc(std::size_t align, std::size_t n) { return memalign(align, n); }
// The obsolete page-aligned ones: glibc's own do not pass through memalign above.
void* valloc(std::size_t n) { return memalign(std::size_t(sysconf(_SC_PAGESIZE)), n); }
void* pvalloc(std::size_t n) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  if (n > SIZE_MAX - page) {
    errno = ENOMEM;
    return nullptr;
  }
  return memalign(page, n == 0 ? page : (n + page - 1) / page * page);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}

#else
namespace {
std::atomic<int> g_meters{0};
std::atomic<long> g_peak{0};
std::atomic<bool> g_interposed{false};
}  // namespace
#endif

namespace grading {

HeapMeter::HeapMeter() {
#ifndef COURSE_NO_HEAP_METER
  g_current.store(0);
#endif
  g_peak.store(0);
  g_meters.fetch_add(1);
}
HeapMeter::~HeapMeter() { g_meters.fetch_sub(1); }
long HeapMeter::peak_bytes() const { return g_peak.load(); }
bool HeapMeter::available() {
  void* p = std::malloc(1);  // goes through our malloc if the interposition took
  std::free(p);
  return g_interposed.load();
}

}  // namespace grading
