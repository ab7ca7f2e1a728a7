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

// Text from lab code: safe_text (messages: control characters dropped) and visible_text (the lab's
// log, which a person `cat`s: control characters shown as cat -v shows them, never acted on).
TEST_CASE("visible_text shows control characters as ^X and keeps UTF-8, newlines and tabs") {
  const std::string raw = "\x1b[31mred\x1b[0m\tbell\x07 del\x7f cr\r nul" + std::string(1, '\0') + "\n";
  CHECK(isolation::visible_text(raw, 1000) == "^[[31mred^[[0m\tbell^G del^? cr^M nul^@\n");
  CHECK(isolation::visible_text("\xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x99\x82\n", 1000) ==
        "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x99\x82\n");  // été ✓ 🙂, as they were
  // Invalid bytes and noncharacters as U+FFFD; the C1 control U+009B (a one-character CSI) as cat -v shows it.
  CHECK(isolation::visible_text("\xff \xc0\xaf \xef\xbf\xbf \xc2\x9b" "31m", 1000) ==
        "\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd M-^[31m");
  CHECK(isolation::visible_text(std::string(100, 'a'), 10) == "aaaaaaaaaa... [truncated]");
}

TEST_CASE("safe_text still drops control characters, and turns newlines and tabs into spaces when asked") {
  CHECK(isolation::safe_text("\x1b[31mred\x07\t\r\nend\x7f \xc2\x9b", 1000) == "[31mred  \nend ");
  CHECK(isolation::safe_text("a\tb\nc", 1000, false) == "a b c");
}
