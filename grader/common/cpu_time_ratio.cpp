#include "cpu_time_ratio.hpp"

#include <algorithm>
#include <cstdio>

namespace grading {

namespace {

constexpr double kBound = 0.75;  // halfway between skipping (about 0.5) and masking (about 1)
constexpr double kDoubtLow = 0.62, kDoubtHigh = 0.9;  // a median in between takes more rounds
constexpr int kMinRounds = 3, kMaxRounds = 9;
constexpr double kLeastFullSeconds = 0.02;  // less is no yardstick (a reading that failed, say)

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace

void skip_under_address_sanitizer() {
  if (kAddressSanitizer)
    skip("not timed under AddressSanitizer: its checks take most of the CPU time (each call 30 "
         "times as long as in a Release build), which then measures them, not the code, and "
         "would take minutes; the Release build grades this");
}

double CpuTimeRatio::median() const {
  std::vector<double> r;
  for (const CpuTimeRound& x : rounds) r.push_back(x.causal / x.full);
  std::sort(r.begin(), r.end());
  const std::size_t n = r.size();
  if (n == 0) return 0;
  return n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
}

std::string CpuTimeRatio::describe() const {
  std::string each;
  for (const CpuTimeRound& x : rounds) each += (each.empty() ? "" : ", ") + fmt(x.causal) + "/" + fmt(x.full);
  return "causal/non-causal CPU time ratio " + fmt(median()) + " (the median of " +
         std::to_string(rounds.size()) + " rounds of " + std::to_string(calls) +
         " calls each side, causal s/non-causal s: " + each +
         "; user + system time of all the lab process's threads during the calls, as the kernel "
         "measured it)";
}

std::optional<CpuTimeRatio> measure_cpu_time_ratio(int calls, const Case& full_case,
                                                   const std::function<void()>& fresh,
                                                   const std::function<std::optional<double>(bool, int)>& timed) {
  CpuTimeRatio r;
  r.calls = calls;
  auto in_doubt = [&] { return r.median() > kDoubtLow && r.median() < kDoubtHigh; };
  while (int(r.rounds.size()) < kMinRounds || (int(r.rounds.size()) < kMaxRounds && in_doubt())) {
    CpuTimeRound round;
    fresh();
    for (int i = 0; i < calls; ++i) {
      const bool causal_first = (int(r.rounds.size()) + i) % 2 == 0;
      for (const bool causal : {causal_first, !causal_first}) {
        const auto t = timed(causal, i);
        if (!t) return std::nullopt;  // a wrong output: its message says why
        (causal ? round.causal : round.full) += *t;
      }
    }
    if (!expect(round.full > kLeastFullSeconds, full_case,
                "the non-causal calls took " + fmt(round.full) +
                    " s of CPU time in the lab process, too little to measure the causal ones against"))
      return std::nullopt;
    r.rounds.push_back(round);
  }
  return r;
}

void expect_causal_cpu_time(const CpuTimeRatio& r, const Case& causal_case, double tile_fraction) {
  const std::string measured = r.describe();
  if (expect(r.median() <= kBound, causal_case,
             measured + " exceeds " + fmt(kBound) +
                 ": with the mask, tiles above the diagonal must be skipped, not computed and "
                 "masked, whatever the element type and on whichever thread (skipping them takes "
                 "about " + fmt(tile_fraction) + " of the time here)"))
    award_fraction(1.0, measured + ", within the bound " + fmt(kBound));  // for --verbose
}

}  // namespace grading
