// Runs one step of a student build within Landlock's file rules (file_rules.hpp, build_rules),
// where bubblewrap cannot make namespaces: ./course's build sandbox without them. The compiler
// then reads the machine's files as in bubblewrap's sandbox (the course, the trusted build and the
// other submissions out of reach, whatever an #include or an .incbin names) and writes only the
// build folder. TMPDIR is set to a folder inside it (the compilers' temporary files).
//
// Usage: file_rules_exec [--hide DIR]... [--read DIR]... --write DIR [--write DIR]... -- COMMAND [ARGS...]
//        file_rules_exec --check      exit 0 where this kernel has Landlock, 1 where it has not
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "file_rules.hpp"

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "file_rules_exec: %s\nusage: file_rules_exec [--hide DIR]... [--read DIR]... --write DIR... -- COMMAND [ARGS...]\n"
                       "       file_rules_exec --check\n", why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--check") == 0) {
    const int fd = isolation::build_rules({}, {}, {});
    return fd >= 0 ? 0 : 1;
  }
  std::vector<std::string> hidden, readable, writable;
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; i += 2) {
    if (i + 1 >= argc) usage("an option without its folder");
    const std::string option = argv[i];
    if (option == "--hide") hidden.push_back(argv[i + 1]);
    else if (option == "--read") readable.push_back(argv[i + 1]);
    else if (option == "--write") writable.push_back(argv[i + 1]);
    else usage(("unknown option " + option).c_str());
  }
  if (i + 1 >= argc) usage("no command after --");
  if (writable.empty()) usage("no --write folder");
  const std::string tmp = writable.front() + "/.tmp";
  mkdir(tmp.c_str(), 0700);
  setenv("TMPDIR", tmp.c_str(), 1);
  const int fd = isolation::build_rules(hidden, readable, writable);
  if (fd < 0 || !isolation::FileRules::apply(fd)) {
    std::fprintf(stderr, "file_rules_exec: this kernel has no Landlock\n");
    return 126;
  }
  close(fd);
  execvp(argv[i + 1], argv + i + 1);
  std::perror("file_rules_exec: cannot run the command");
  return 127;
}
