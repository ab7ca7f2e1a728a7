// The main() of every grader: doctest runs the checks in the order they are written, after the
// seed is printed. In a library of its own so that programs with their own main (the precision
// report, the tests of this folder) can link the grading harness without it.
#include "grading.hpp"

#include <cstdio>

int main(int argc, char** argv) {
  doctest::Context context;
  context.setOption("order-by", "file");  // checks run in the order they are written
  context.applyCommandLine(argc, argv);
  std::printf("[grader] seed %llu (set COURSE_SEED or ./course grade --seed S to change it)\n",
              static_cast<unsigned long long>(grading::seed()));
  return context.run();
}
