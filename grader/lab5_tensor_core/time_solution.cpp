// Times the lab 5 solution for the grader's speed checks: `time_lab5_solution D CAUSAL` prints
// the median milliseconds. The grader runs it in the same grading run, on the same GPU, right
// after timing the student's kernel (as Stanford CS149's grader runs its reference binary).
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "speed.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: time_lab5_solution D CAUSAL(0|1)\n");
    return 2;
  }
  try {
    lab5_speed::SpeedConfig c;
    c.d = std::atoi(argv[1]);
    c.causal = std::atoi(argv[2]) != 0;
    std::printf("%.6f\n", lab5_speed::median_ms(c));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "time_lab5_solution: %s\n", e.what());
    return 1;
  }
}
