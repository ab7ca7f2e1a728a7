#include "wire.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace isolation {

void Packet::put_bytes(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  data_.insert(data_.end(), b, b + n);
}

void Packet::get_bytes(void* p, std::size_t n) {
  if (n > remaining())
    throw Malformed("expected " + std::to_string(n) + " more bytes, only " +
                    std::to_string(remaining()) + " left");
  if (n) std::memcpy(p, data_.data() + read_, n);
  read_ += n;
}

void Packet::put_string(const std::string& s) {
  put<std::uint64_t>(s.size());
  put_bytes(s.data(), s.size());
}

std::string Packet::get_string(std::size_t max_length) {
  const std::size_t n = get_count(1);
  if (n > max_length) throw Malformed("a string of " + std::to_string(n) + " bytes is too long");
  std::string s(n, '\0');
  get_bytes(s.data(), n);
  return s;
}

std::size_t Packet::get_count(std::size_t element_bytes) {
  const auto n = get<std::uint64_t>();
  if (element_bytes && n > remaining() / element_bytes)
    throw Malformed("a count of " + std::to_string(n) + " elements exceeds the data that follows");
  return std::size_t(n);
}

namespace {

// Milliseconds left before the deadline, for poll (-1: no deadline); throws once it has passed.
int ms_left(std::chrono::steady_clock::time_point deadline, bool limited) {
  if (!limited) return -1;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) throw std::runtime_error("timed out");
  return int(std::min<long long>(left.count(), 1 << 30));
}

// Waits until fd is ready for `events` (POLLIN, POLLOUT); throws "timed out" at the deadline.
void wait_until_ready(int fd, short events, std::chrono::steady_clock::time_point deadline, bool limited) {
  pollfd pfd{fd, events, 0};
  int ready;
  while ((ready = ::poll(&pfd, 1, ms_left(deadline, limited))) < 0 && errno == EINTR) {
  }
  if (ready == 0) throw std::runtime_error("timed out");
}

// Writes n bytes. A non-blocking descriptor that is full (EAGAIN) is waited on until the deadline.
bool write_all(int fd, const void* p, std::size_t n, std::chrono::steady_clock::time_point deadline,
               bool limited) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_until_ready(fd, POLLOUT, deadline, limited);
      continue;
    }
    if (w <= 0) return false;
    b += w;
    n -= std::size_t(w);
  }
  return true;
}

// Reads exactly n bytes before the deadline. Returns false on end of file before any byte of
// the frame arrived (a clean close); throws on a timeout or a close in the middle of a frame.
bool read_all(int fd, void* p, std::size_t n, std::chrono::steady_clock::time_point deadline,
              bool limited, bool first) {
  auto* b = static_cast<std::uint8_t*>(p);
  std::size_t got = 0;
  while (got < n) {
    wait_until_ready(fd, POLLIN, deadline, limited);
    const ssize_t r = ::read(fd, b + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (first && got == 0) return false;
      throw Malformed("the connection closed in the middle of a frame");
    }
    got += std::size_t(r);
  }
  return true;
}

}  // namespace

bool write_frame(int fd, const Packet& p, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const bool limited = timeout_ms >= 0;
  const auto n = std::uint32_t(p.bytes().size());
  return write_all(fd, &n, sizeof n, deadline, limited) &&
         write_all(fd, p.bytes().data(), n, deadline, limited);
}

bool read_frame(int fd, Packet& p, int timeout_ms, std::size_t max_bytes) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const bool limited = timeout_ms >= 0;
  std::uint32_t n = 0;
  if (!read_all(fd, &n, sizeof n, deadline, limited, true)) return false;
  if (n > kMaxFrameBytes || n > max_bytes)
    throw Malformed("a frame of " + std::to_string(n) + " bytes, over the limit of " +
                    std::to_string(std::min<std::size_t>(max_bytes, kMaxFrameBytes)) + " bytes");
  std::vector<std::uint8_t> bytes(n);
  read_all(fd, bytes.data(), n, deadline, limited, false);
  p = Packet(std::move(bytes));
  return true;
}

namespace {

// What becomes of a control character: dropped (safe_text: messages for a terminal, JSON and XML)
// or shown in caret notation (visible_text: a log, where the reader should see that it was there).
enum class Controls { drop, show };

// The one pass behind safe_text and visible_text.
std::string clean_text(const std::string& s, std::size_t max_bytes, bool keep_newlines, Controls controls) {
  const bool show = controls == Controls::show;
  std::string out;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  const char* replacement = "\xEF\xBF\xBD";  // U+FFFD
  std::size_t i = 0;
  while (i < n && out.size() < max_bytes) {
    const unsigned char c = b[i];
    if (c < 0x80) {
      if (c == '\n' && keep_newlines) out += '\n';
      else if (c == '\t' && show) out += '\t';
      else if (c >= 0x20 && c != 0x7F) out += char(c);
      else if (show) out += c == 0x7F ? std::string("^?") : std::string{'^', char(c + 0x40)};  // ESC: ^[
      else if (c == '\n' || c == '\t' || c == '\r') out += ' ';
      // other control characters (ESC, BEL, ...) are dropped: no escape sequences get through
      ++i;
      continue;
    }
    // A multi-byte sequence: its length from the lead byte, then continuation bytes 10xxxxxx,
    // no overlong forms, no surrogates, nothing above U+10FFFF.
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (b[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    if (ok) {
      const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
      const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
      const bool c1_control = cp >= 0x80 && cp <= 0x9F;  // includes the 8-bit CSI
      // U+FFFE and U+FFFF are no characters of XML 1.0 (a junit.xml holding one does not parse),
      // and U+FDD0-U+FDEF are noncharacters too: dropped, as the C1 controls are.
      const bool noncharacter = cp == 0xFFFE || cp == 0xFFFF || (cp >= 0xFDD0 && cp <= 0xFDEF);
      ok = !overlong && !surrogate && cp <= 0x10FFFF;
      if (ok && !c1_control && !noncharacter) out.append(s, i, len);
      else if (ok && show && c1_control) out += std::string("M-^") + char(cp - 0x80 + 0x40);  // as cat -v
      else if (ok && show) out += replacement;  // a noncharacter: shown as U+FFFD, not dropped
      if (ok) {
        i += len;
        continue;
      }
    }
    out += replacement;
    ++i;
  }
  if (i < n) out += "... [truncated]";
  return out;
}

}  // namespace

std::string safe_text(const std::string& s, std::size_t max_bytes, bool keep_newlines) {
  return clean_text(s, max_bytes, keep_newlines, Controls::drop);
}

std::string visible_text(const std::string& s, std::size_t max_bytes) {
  return clean_text(s, max_bytes, true, Controls::show);
}

}  // namespace isolation
