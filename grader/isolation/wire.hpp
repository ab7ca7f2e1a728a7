// The wire between the trusted grader and the untrusted lab process.
//
// The grader never links student code. It sends each call of a lab function as a request to a
// separate "lab process" (the student's code plus a small server, grader/isolation/worker_main.cpp)
// and reads the results back. Everything the lab process says is untrusted input: every read is
// bounds-checked, and a reply that does not parse is a failure of the lab, not of the grader.
//
// A frame is a 4-byte length followed by that many bytes. Inside, a Packet is a flat sequence of
// fixed-size values, strings and byte arrays, read back in the order they were written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace isolation {

// A reply (or request) that does not parse: too short, a length beyond the data, and so on.
struct Malformed : std::runtime_error {
  explicit Malformed(const std::string& what) : std::runtime_error(what) {}
};

class Packet {
 public:
  Packet() = default;
  explicit Packet(std::vector<std::uint8_t> bytes) : data_(std::move(bytes)) {}

  template <class T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    put_bytes(&value, sizeof value);
  }
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    get_bytes(&value, sizeof value);
    return value;
  }
  void put_bytes(const void* p, std::size_t n);
  void get_bytes(void* p, std::size_t n);
  void put_string(const std::string& s);
  std::string get_string(std::size_t max_length = 1 << 20);

  // The count of elements that follow, checked against what is left: a lying count cannot make
  // the reader allocate more than the packet holds.
  std::size_t get_count(std::size_t element_bytes);

  std::size_t remaining() const { return data_.size() - read_; }
  const std::vector<std::uint8_t>& bytes() const { return data_; }

 private:
  std::vector<std::uint8_t> data_;
  std::size_t read_ = 0;
};

// The largest frame either side accepts (a request holds the inputs of one call).
constexpr std::uint32_t kMaxFrameBytes = 1u << 30;

// Writes one frame; returns false if the other end is gone. On a non-blocking descriptor (the
// grader's end of a request pipe), throws std::runtime_error("timed out") if the other end has
// not taken it all within timeout_ms (< 0: no limit): a lab process that never reads must not
// hold the grader for good once a request outgrows what the pipe holds.
bool write_frame(int fd, const Packet& p, int timeout_ms = -1);

// Reads one frame. Returns false on end of file. Throws Malformed for a frame over max_bytes
// (checked before anything is allocated) and std::runtime_error("timed out") if nothing complete
// arrives within timeout_ms (< 0: no limit).
bool read_frame(int fd, Packet& p, int timeout_ms, std::size_t max_bytes = kMaxFrameBytes);

// Text from untrusted code made safe for a terminal, JSON and XML: valid UTF-8 only (invalid
// bytes become U+FFFD), no control characters or escape sequences (newline and tab are kept as
// spaces unless keep_newlines), and at most max_bytes (then "... [truncated]").
std::string safe_text(const std::string& s, std::size_t max_bytes = 4096, bool keep_newlines = true);

// The same text made harmless but not shortened, for a log that a person reads with `cat` (what a
// lab's code printed): valid UTF-8 kept, invalid bytes as U+FFFD, newline and tab kept, and every
// other control character shown rather than dropped, as `cat -v` shows it: ESC as the two
// characters "^[", BEL as "^G", DEL as "^?", the C1 control U+009B (a one-character CSI) as
// "M-^[". A terminal prints them; none of them drives it. At most max_bytes (then "... [truncated]").
std::string visible_text(const std::string& s, std::size_t max_bytes);

// The line a grader writes on its results pipe (COURSE_RESULTS_FD) when the lab process was
// killed because a call ran past its time limit: "killed_call\t<seconds the call took>\n". The
// runner does not count those seconds against the lab's own time limit, up to a cap
// (grader/runner/process.cpp): a function that hangs costs the checks whose calls hang, not the
// checks after them. Only the trusted grader holds that pipe; the lab process never does.
inline constexpr const char* kKilledCallLine = "killed_call";

}  // namespace isolation
