// The heap meter sees every way a lab can take heap memory from the C library: each allocation
// function in turn takes 1 MiB under a fresh meter, whose peak must count it.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "heap_meter.hpp"

namespace {
constexpr std::size_t kBytes = 1u << 20;

struct Allocator {
  std::string name;
  std::function<void*()> allocate;
};

std::vector<Allocator> allocators() {
  return {
      {"malloc", [] { return std::malloc(kBytes); }},
      {"calloc", [] { return std::calloc(kBytes / 8, 8); }},
      {"realloc", [] { return std::realloc(std::malloc(16), kBytes); }},
      {"memalign", [] { return memalign(64, kBytes); }},
      {"aligned_alloc", [] { return std::aligned_alloc(64, kBytes); }},
      {"posix_memalign", [] {
         void* p = nullptr;
         return posix_memalign(&p, 64, kBytes) == 0 ? p : nullptr;
       }},
      {"valloc", [] { return valloc(kBytes); }},
      {"pvalloc", [] { return pvalloc(kBytes - 1); }},
      {"operator new[]", [] { return static_cast<void*>(new char[kBytes]); }},
  };
}
}  // namespace

TEST_CASE("the heap meter counts every allocation function of the C library") {
  if (!grading::HeapMeter::available()) {
    MESSAGE("the heap meter could not interpose malloc here (a sanitizer build): nothing to check");
    return;
  }
  for (const Allocator& a : allocators()) {
    CAPTURE(a.name);
    long peak = 0;
    {
      grading::HeapMeter meter;
      void* p = a.allocate();
      REQUIRE(p != nullptr);
      std::memset(p, 1, kBytes - 1);
      peak = meter.peak_bytes();
      if (a.name == "operator new[]")
        delete[] static_cast<char*>(p);
      else
        std::free(p);
    }
    CHECK(peak >= long(kBytes) - 1);
  }
}
