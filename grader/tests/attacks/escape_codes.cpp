// what: prints terminal escape codes (clear screen, colours, window title, a bell) to its log, and throws a message with invalid UTF-8, the noncharacters U+FFFE and U+FFFF (XML 1.0 forbids them), the same escape codes and 200 KB of text
// expect: no points
// --- top
#include <cstdio>
#include <stdexcept>
#include <string>
// --- body
std::fputs("\x1b[2J\x1b[31mALL CHECKS PASSED\x1b[0m\x07\x1b]0;title\x07\n", stdout);
std::fflush(stdout);
throw std::runtime_error(std::string("\xff\xfe\xc0\xaf bad \xef\xbf\xbf\xef\xbf\xbe \x1b[2J\x1b[31mALL CHECKS PASSED\x1b[0m\x07\x1b]0;title\x07 \x9b" "31m <tag>&amp;\"'") + std::string(200000, 'A'));
