// The frames between the grader and a lab process (wire.hpp): what a lab process that never reads
// its request, or never replies, can cost the grader (a call's time limit, never more).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "wire.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// A request larger than any pipe holds (64 KiB by default, at most 1 MiB unprivileged).
isolation::Packet large_request() {
  isolation::Packet p;
  const std::vector<std::uint8_t> inputs(4 << 20, 7);
  p.put_bytes(inputs.data(), inputs.size());
  return p;
}

struct Pipe {
  int read_end = -1, write_end = -1;
  explicit Pipe(bool nonblocking_writes) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    read_end = fds[0], write_end = fds[1];
    if (nonblocking_writes) fcntl(write_end, F_SETFL, fcntl(write_end, F_GETFL) | O_NONBLOCK);
  }
  ~Pipe() { close(read_end), close(write_end); }
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

TEST_CASE("a request nobody reads times out at the call's limit") {
  Pipe pipe(/*nonblocking_writes=*/true);
  const auto start = Clock::now();
  CHECK_THROWS_WITH_AS(isolation::write_frame(pipe.write_end, large_request(), 200), "timed out", std::runtime_error);
  CHECK(seconds_since(start) >= 0.19);
  CHECK(seconds_since(start) < 5.0);
}

TEST_CASE("a request that is read arrives whole, through the same non-blocking end") {
  Pipe pipe(/*nonblocking_writes=*/true);
  const isolation::Packet sent = large_request();
  isolation::Packet got;
  std::thread reader([&] { isolation::read_frame(pipe.read_end, got, 10000); });
  CHECK(isolation::write_frame(pipe.write_end, sent, 10000));
  reader.join();
  CHECK(got.bytes() == sent.bytes());
}

TEST_CASE("a reader that is gone makes the write fail, not hang") {
  Pipe pipe(/*nonblocking_writes=*/true);
  close(pipe.read_end);
  pipe.read_end = -1;
  signal(SIGPIPE, SIG_IGN);
  CHECK_FALSE(isolation::write_frame(pipe.write_end, large_request(), 1000));
}

// Why the grader makes its end non-blocking: on a blocking descriptor a write larger than the
// free space waits for the reader whatever the limit, so the same request would hold the grader
// until someone reads it (here: the test, after 300 ms).
TEST_CASE("on a blocking end the same write waits for a reader, limit or not") {
  Pipe pipe(/*nonblocking_writes=*/false);
  std::atomic<bool> returned{false};
  std::thread writer([&] {
    try {
      isolation::write_frame(pipe.write_end, large_request(), 200);
    } catch (const std::exception&) {
    }
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(returned.load());  // still waiting, past its 200 ms
  isolation::Packet got;
  isolation::read_frame(pipe.read_end, got, 10000);  // unblocks it
  writer.join();
  CHECK(returned.load());
}
