// The file-system rules of a lab process that runs without bubblewrap's namespaces (Landlock,
// Linux 5.13 and up; no privilege needed). Without namespaces the lab process sees the machine's
// files: the system-call filter keeps a CPU lab from writing, but it could read whatever its user
// may read, the course's solutions and trusted build among them (inside many containers, such as
// an autograder's, bubblewrap cannot make namespaces and this is how labs are graded). These rules
// give it the view bubblewrap's sandbox gives (lab_process.cpp, sandbox_options), read-only:
//   - read and run beneath /usr, /bin, /sbin, /lib, /lib64 and /lib32, and read /etc/ld.so.cache;
//   - read /proc; a GPU lab also /sys, and write /proc (its driver names its threads there);
//   - read and write the device files a program needs (/dev/null, zero, full, random, urandom),
//     and a GPU lab the GPU's (is_gpu_device_file);
//   - read and run beneath the folders of libraries it is given (a GPU lab: the CUDA runtime's,
//     where the system's folders do not hold it);
//   - read and run its own program, and nothing else: no other file, no folder made, nothing
//     removed or renamed, anywhere.
// A folder that holds one of the course's paths (its source tree, its build) is never allowed as a
// whole: its other entries are, one by one, down to the course's own folder, which is left out.
#pragma once

#include <string>
#include <vector>

namespace isolation {

// The system's folders of programs and libraries, which every lab process sees, read-only:
// bubblewrap binds them (lab_process.cpp, sandbox_options), Landlock's rules allow them (FileRules).
inline constexpr const char* kSystemFolders[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"};

// `path` with every symbolic link resolved, or "" where it does not exist.
std::string real_path(const std::string& path);

// Whether /dev/`name` is a file through which a GPU lab's CUDA driver reaches the GPU: NVIDIA's
// (nvidia0, nvidiactl, nvidia-uvm, nvidia-caps/...) or, under WSL 2, where the Windows driver
// serves CUDA, the DirectX kernel interface dxg. The GPU lab's sandbox binds them (lab_process.cpp)
// and its file rules allow them.
bool is_gpu_device_file(const std::string& name);

// Whether `path` is `folder` or lies beneath it (both real paths; everything lies beneath "/").
bool is_within(const std::string& path, const std::string& folder);

// The paths that the rules allow reading beneath `folder` without reaching any of `course`:
// `folder` itself where it holds none of them; else, for each entry of it (in the order readdir
// gives), the same again; nothing for a folder that is one of `course`.
std::vector<std::string> paths_beside(const std::string& folder, const std::vector<std::string>& course);

// A student build's rules where bubblewrap cannot make namespaces (the view of ./course's build
// sandbox): read and run everything but what `hidden` holds (the course, the trusted build, the
// other submissions), read beneath each of `readable` (the submission, the staged dependencies)
// and do anything beneath each of `writable` (its build folder), and write /dev/null. The
// ruleset's descriptor (apply it with FileRules::apply), or -1 where this kernel has no Landlock.
int build_rules(const std::vector<std::string>& hidden, const std::vector<std::string>& readable,
                const std::vector<std::string>& writable);

class FileRules {
 public:
  // Built in the grader, before the fork: the ruleset for a lab process that runs `program`, a
  // GPU lab's or a CPU lab's, never reaching any of `course`; it may also read and run beneath
  // each of `libraries` (the CUDA runtime's folder, outside the system's: library_folder_to_bind).
  FileRules(const std::string& program, bool gpu, const std::vector<std::string>& course,
            const std::vector<std::string>& libraries = {});
  ~FileRules();
  FileRules(const FileRules&) = delete;
  FileRules& operator=(const FileRules&) = delete;
  // False where this kernel has no Landlock (then the lab process runs without these rules, and
  // its log says so) or the ruleset could not be made.
  bool ready() const { return fd_ >= 0; }
  // The ruleset's descriptor (above 63, so that the child's moves of 0-4 never take its number).
  int fd() const { return fd_; }

  // In the child, between fork and exec (only system calls): no_new_privs, then the ruleset for
  // this thread, inherited by the program it runs. False where the kernel refused it.
  static bool apply(int fd);

 private:
  int fd_ = -1;
};

}  // namespace isolation
