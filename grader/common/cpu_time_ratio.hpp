// The causal work rule of labs 3 and 7 measured by the kernel instead of CountedFloat: the CPU
// time the lab process spends in causal calls against non-causal calls of the same shape, in the
// element type the lab really runs (float). It counts whatever the lab process does during the
// calls, in any type and on any thread, so code that skips the tiles above the diagonal only
// when it is being counted (Acc = CountedFloat) is caught: skipping takes about half the time,
// computing and masking about as long as no mask.
//
// Timing is noisy, so the rule asks for no precision (a bound halfway between a half and one),
// and the ratio of two CPU times, not either one, is graded, so a slower machine or code changes
// nothing. Other work on the machine slows calls unevenly, and not only by taking turns on the
// core: a process on the other hardware thread of the same core, or, in a virtual machine,
// another machine's use of the shared cache, makes every instruction slower, CPU time up to 2x,
// for seconds at a time. So:
//   - each side of a round is `calls` calls on distinct inputs (nothing one call computes serves
//     another), small enough that K and V stay in a core's L2 cache, measured by the kernel's
//     CPU-time clock in nanoseconds (isolation::LabProcess::cpu_seconds);
//   - a round runs in a freshly started lab process (nothing an earlier round left behind is
//     charged or reused), a causal call and a non-causal one in turn, in alternating order, so
//     that both sides of a round see the same load, however it comes and goes;
//   - the ratio graded is the median of the rounds' ratios, which one disturbed round of three
//     (or two of five) does not move, with more rounds, up to kMaxRounds, while it lies near the
//     bound on either side.
//     Code that does not skip gains nothing from them: its rounds gather around its own ratio.
// (One call of lab 3 at N = 2048, d = 128 a side, timed in 10 ms ticks, measured the solution's
// ratio anywhere from 0.33 to 1.04 on an idle 2-core virtual machine whose host shares its cores:
// with the calls apart, each side saw a different load.)
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "grading.hpp"

namespace grading {

struct CpuTimeRound {
  double causal = 0, full = 0;  // seconds of the lab process's CPU time, all calls of a side
};

struct CpuTimeRatio {
  int calls = 0;  // per side and round
  std::vector<CpuTimeRound> rounds;
  double median() const;  // of the rounds' causal/full ratios
  // "causal/non-causal CPU time ratio 0.55 (the median of 3 rounds of 6 calls each side, ...)"
  std::string describe() const;
};

// Measures the ratio. fresh() starts a new lab process and warms it; timed(causal, i) makes call
// i of one side and returns the CPU time it took, or nullopt when its output was wrong (the check
// has failed, with its own message). Returns nullopt when a call was wrong or when a non-causal
// side took too little CPU time to measure the causal one against (the check then fails on
// full_case, saying so).
std::optional<CpuTimeRatio> measure_cpu_time_ratio(int calls, const Case& full_case,
                                                   const std::function<void()>& fresh,
                                                   const std::function<std::optional<double>(bool, int)>& timed);

// Skips the current check in a grader built with AddressSanitizer (./course test --sanitize):
// its checks take most of the CPU time, which would then measure them, not the lab's code.
void skip_under_address_sanitizer();

// The rule: the ratio at most 0.75. Fails the current check on causal_case when it is over,
// naming tile_fraction, the share of the tiles on or below the diagonal (what skipping costs);
// otherwise records the figures for --verbose.
void expect_causal_cpu_time(const CpuTimeRatio& r, const Case& causal_case, double tile_fraction);

}  // namespace grading
