// The memory checks of labs 3 and 7, as the kernel measures them: the peak resident memory
// (VmHWM) of the lab process, which no code of the lab's can fake, unlike the heap meter that
// counts inside it. Each problem runs in a fresh lab process: started, sent a "ping" (its
// program loaded, its static constructors run), its peak read (`before`), then the call, then
// its peak read again (`after`). Two bounds:
//   growth    after - before: what the call itself touched, held to the lab's O(N d + tiles)
//             bound plus its inputs and outputs and a few MiB of pages;
//   absolute  after: the same plus what the lab process may hold before any call. Memory touched
//             ahead of the call (a static pool that a static constructor filled) raises the peak
//             before `before` is read, so the growth cannot see it; the absolute peak does.
#pragma once

#include <string>

#include "grading.hpp"

namespace grading {

// What a lab process may hold resident before its first call: its program, the C and C++
// libraries' pages it touches, the server's buffers and its stack. The solutions' lab processes
// of labs 3 and 7 hold 2.8 to 2.9 MiB (VmHWM after the ping, x86-64, glibc, Release build, in
// the sandbox or not); 8 MiB leaves room for other builds and library versions, and still
// stays below the smallest score matrix the memory checks ask for (16 MiB, lab 7's N = 2048).
constexpr long kLabProcessBaseline = 8L << 20;

// Fails the current check if the lab process's peak grew by more than `growth_bound` during the
// call, or if its peak after the call passes `growth_bound` plus kLabProcessBaseline.
// `bound_terms` says what growth_bound allows, for the message ("the O(N*d + ...) bound plus
// its inputs and outputs and 4 MiB").
inline void expect_resident_memory(const Case& c, long before, long after, long growth_bound,
                                   const std::string& bound_terms) {
  expect(after - before <= growth_bound, c,
         "the lab process's peak resident memory grew by " + std::to_string(after - before) +
             " bytes during the call, more than " + bound_terms + " (" +
             std::to_string(growth_bound) + " bytes)");
  const long absolute_bound = growth_bound + kLabProcessBaseline;
  expect(after <= absolute_bound, c,
         "the lab process's peak resident memory was " + std::to_string(after) +
             " bytes after the call, more than " + bound_terms + " (" +
             std::to_string(growth_bound) + " bytes) plus " +
             std::to_string(kLabProcessBaseline >> 20) +
             " MiB for its program, libraries and server (" + std::to_string(absolute_bound) +
             " bytes): the peak counts from the lab process's start, so memory touched before "
             "the call (in a static constructor, say) counts too");
}

}  // namespace grading
