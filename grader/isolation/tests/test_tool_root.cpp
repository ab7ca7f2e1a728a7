// Which folder the lab's sandbox gets read-only for a tool that runs the lab process
// (COURSE_LAB_TOOL): the toolkit's root, but never a folder that holds the grader or the course's
// tree, since its build or its solutions would then be in the lab's view. And which folder a GPU
// lab gets for the CUDA runtime its program loads, under the same rule.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "lab_process.hpp"

using isolation::tool_folder_to_bind;

TEST_CASE("a toolkit elsewhere is bound at its root") {
  const std::string grader = "/home/ta/course/build/grader/lab4_cuda/grade_lab4";
  CHECK(tool_folder_to_bind("/opt/cuda/compute-sanitizer/compute-sanitizer", {grader}) == "/opt/cuda");
  CHECK(tool_folder_to_bind("/home/ta/cuda-13.0/bin/compute-sanitizer", {grader}) == "/home/ta/cuda-13.0");
  CHECK(tool_folder_to_bind("/home/ta/course-tools/bin/tool", {grader}) == "/home/ta/course-tools");
  // Inside the course, but two levels above .deps/bin/ is .deps, which holds no grader.
  CHECK(tool_folder_to_bind("/home/ta/course/.deps/bin/tool", {grader}) == "/home/ta/course/.deps");
}

TEST_CASE("under /usr nothing more is bound") {
  CHECK(tool_folder_to_bind("/usr/local/cuda/compute-sanitizer/compute-sanitizer", {"/x/grade_lab4"}).empty());
}

TEST_CASE("a root that holds the grader is narrowed to the tool's own folder, or to nothing") {
  const std::string grader = "/home/ta/course/build/grader/lab4_cuda/grade_lab4";
  // Two levels above a tool in the course's tools/ is the course itself, solutions and all.
  CHECK(tool_folder_to_bind("/home/ta/course/tools/tool", {grader}) == "/home/ta/course/tools");
  // A tool in the home folder that holds the course: its own folder holds it too.
  CHECK(tool_folder_to_bind("/home/ta/tool", {grader}).empty());
  CHECK(tool_folder_to_bind("/home/ta/bin/tool", {grader}) == "/home/ta/bin");
  // A tool at the top: "/" holds everything.
  CHECK(tool_folder_to_bind("/tool", {grader}).empty());
  CHECK(tool_folder_to_bind("/opt/tool", {grader}) == "/opt");
}

TEST_CASE("a folder is matched whole, not as the start of a name") {
  const std::string grader = "/home/ta/course/build/grade_lab4";
  CHECK(tool_folder_to_bind("/home/ta/course-cuda/bin/tool", {grader}) == "/home/ta/course-cuda");
}

TEST_CASE("a build outside the course's tree does not leave the tree's solutions bindable") {
  // The course in the home folder, built on scratch space: the home folder holds no grader, but
  // it holds the solutions.
  const std::vector<std::string> course = {"/scratch/build/grader/lab4_cuda/grade_lab4", "/home/ta/course"};
  CHECK(tool_folder_to_bind("/home/ta/bin/tool", course) == "/home/ta/bin");
  CHECK(tool_folder_to_bind("/home/ta/course/tools/tool", course) == "/home/ta/course/tools");
  CHECK(tool_folder_to_bind("/home/ta/tool", course).empty());
  // A tool whose toolkit root would be the tree itself: its own folder only.
  CHECK(tool_folder_to_bind("/home/ta/course/bin/tool", course) == "/home/ta/course/bin");
  CHECK(tool_folder_to_bind("/scratch/tools/bin/tool", course) == "/scratch/tools");
  CHECK(tool_folder_to_bind("/scratch/bin/tool", course) == "/scratch/bin");
}

// library_folder_to_bind works on real folders: a scratch tree stands in for the machine's.
TEST_CASE("the CUDA runtime's folder is bound where the system's folders do not hold it") {
  using isolation::library_folder_to_bind;
  char top[] = "/tmp/course-library-folder-XXXXXX";
  REQUIRE(mkdtemp(top) != nullptr);
  const std::string root = top, toolkit = root + "/opt/cuda/lib64", course = root + "/home/ta/course";
  REQUIRE(std::system(("mkdir -p '" + toolkit + "' '" + course + "/build'").c_str()) == 0);
  const std::vector<std::string> course_paths = {course, course + "/build"};
  CHECK(library_folder_to_bind(toolkit, course_paths) == toolkit);
  // Named through a link: bound at its real path, where the loader finds it after the link.
  REQUIRE(symlink(toolkit.c_str(), (root + "/cuda-link").c_str()) == 0);
  CHECK(library_folder_to_bind(root + "/cuda-link", course_paths) == toolkit);
  // Beneath /usr (and /lib, which is /usr/lib on many systems): bound already.
  CHECK(library_folder_to_bind("/usr/lib", course_paths).empty());
  CHECK(library_folder_to_bind("/lib", course_paths).empty());
  // A folder that holds the course, or lies in it (a toolkit unpacked in the build): never.
  CHECK(library_folder_to_bind(root + "/home", course_paths).empty());
  CHECK(library_folder_to_bind(course + "/build", course_paths).empty());
  CHECK(library_folder_to_bind("/", course_paths).empty());
  // Nothing there (the toolkit moved since the course was configured), or nothing named.
  CHECK(library_folder_to_bind(root + "/opt/gone", course_paths).empty());
  CHECK(library_folder_to_bind("", course_paths).empty());
  REQUIRE(std::system(("rm -rf '" + root + "'").c_str()) == 0);
}
