#define DOCTEST_CONFIG_IMPLEMENT
#include "grading.hpp"

#include "gpu_share.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <mutex>
#include <stdexcept>

namespace grading {

namespace {

// Thrown by skip(). The listener recognises a skip by the flag skip() sets, never by the text of
// an exception: lab code can throw any message it likes, but it cannot set this flag (it runs
// in another process).
struct SkipCheck : std::runtime_error {
  explicit SkipCheck(const std::string& r) : std::runtime_error("skipped: " + r) {}
};
struct Skip {
  bool set = false;
  std::string reason;
};
Skip& current_skip() {
  static Skip skip;
  return skip;
}

// The comparison of the current check that came closest to its band, for --verbose.
struct Closest {
  double ratio = -1;  // max abs error / band
  std::string figures;
};
Closest& closest() {
  static Closest c;
  return c;
}

// Set by award_fraction() during a check, read by the listener when the check ends.
struct Award {
  bool set = false;
  double fraction = 1.0;
  std::string note;
};
Award& current_award() {
  static Award award;
  return award;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\r') c = ' ';
  std::string out;
  for (char c : s) out += (c == '\n') ? std::string("\\n") : std::string(1, c);
  if (out.size() > 4000) out = out.substr(0, 4000) + "...";
  return out;
}

// Failures of the current check, counted by the listener below.
int& failure_count() {
  static int count = 0;
  return count;
}

// The failure of the current check shown first (fail_first), if any.
std::string& lead_failure() {
  static std::string message;
  return message;
}

// Writes one line per event to the descriptor COURSE_RESULTS_FD (a pipe the runner reads; see
// grader/runner/). Only this process holds it: the lab's code runs elsewhere.
class ResultsListener : public doctest::IReporter {
 public:
  explicit ResultsListener(const doctest::ContextOptions&) {
    if (const char* fd = std::getenv("COURSE_RESULTS_FD")) fd_ = std::atoi(fd);
  }

  void report_query(const doctest::QueryData& q) override {
    for (unsigned i = 0; i < q.num_data; ++i) {
      const char* desc = q.data[i]->m_description ? q.data[i]->m_description : "";
      emit("check\t" + one_line(q.data[i]->m_name) + '\t' + desc + '\n');
    }
  }
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& tc) override {
    messages_.clear();
    skipped_.clear();
    failure_count() = 0;
    lead_failure().clear();
    current_award() = Award{};
    current_skip() = Skip{};
    closest() = Closest{};
    // A GPU lab graded beside others waits here for its share of the GPU (gpu_share.hpp). The
    // runner stops the lab's clock from "waiting" to "waited" and adds the wait to its time
    // limit, so a queue for the GPU never times a lab out, however long it is.
    const std::string name = tc.m_name;
    if (gpu_.shared()) emit("waiting\n");
    const double waited = gpu_.acquire(name.rfind("speed:", 0) == 0);
    if (gpu_.shared()) emit("waited\t" + std::to_string(waited) + '\n');
    start_ = std::chrono::steady_clock::now();
    emit("start\t" + one_line(tc.m_name) + '\n');
    name_ = tc.m_name;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& st) override {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const bool failed = st.failure_flags || st.numAssertsFailedCurrentTest;
    const Award& award = current_award();
    std::string status = !skipped_.empty() ? "skip" : failed ? "fail" : "pass";
    double credit = status == "pass" ? 1.0 : 0.0;
    std::string msg = skipped_.empty() ? messages_ : skipped_;
    if (skipped_.empty() && !lead_failure().empty())
      msg = lead_failure() + (messages_.empty() ? "" : "\n" + messages_);
    if (status == "pass" && award.set) {
      credit = award.fraction;
      status = credit >= 1.0 ? "pass" : credit > 0.0 ? "partial" : "fail";
      msg = award.note;
    }
    if (!closest().figures.empty()) emit("figures\t" + one_line(name_) + '\t' + one_line(closest().figures) + '\n');
    emit("end\t" + one_line(name_) + '\t' + status + '\t' + std::to_string(secs) + '\t' +
         one_line(msg) + '\t' + std::to_string(credit) + '\n');
    gpu_.release();
  }
  void test_case_exception(const doctest::TestCaseException& e) override {
    if (current_skip().set) {
      skipped_ = current_skip().reason;
      return;
    }
    add("exception: " + std::string(e.error_string.c_str()));
  }
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& a) override {
    if (!a.m_failed) return;
    std::string m = a.m_expr;
    if (a.m_threw) m += std::string(" threw \"") + a.m_exception.c_str() + "\"";
    else if (a.m_exception_type) m += std::string(" did not throw ") + a.m_exception_type;
    else m += std::string(" is ") + a.m_decomp.c_str();
    add(m);
  }
  // FAIL_CHECK and friends arrive here; plain MESSAGE()s (warnings) are not failures.
  void log_message(const doctest::MessageData& m) override {
    if (m.m_severity & doctest::assertType::is_warn) return;
    add(m.m_string.c_str());
  }
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  void add(const std::string& m) {
    ++failure_count();
    if (m == lead_failure()) return;  // shown first, at the check's end
    // Keep the first few failures: the first one is usually the cause.
    if (count_lines(messages_) < 4) messages_ += (messages_.empty() ? "" : "\n") + m;
  }
  static int count_lines(const std::string& s) {
    int n = s.empty() ? 0 : 1;
    for (char c : s) n += (c == '\n');
    return n;
  }
  void emit(const std::string& line) const {
    if (fd_ < 0) return;
    for (std::size_t at = 0; at < line.size();) {
      const ssize_t w = ::write(fd_, line.data() + at, line.size() - at);
      if (w <= 0) return;
      at += std::size_t(w);
    }
  }
  int fd_ = -1;
  GpuShare gpu_;
  std::string name_, messages_, skipped_;
  std::chrono::steady_clock::time_point start_;
};

REGISTER_LISTENER("course_results", 1, ResultsListener);

}  // namespace

doctest::description points(int n, const char* parent) {
  // doctest keeps the pointer, so the text must live as long as the program.
  static std::deque<std::string> storage;
  storage.push_back("points=" + std::to_string(n) + (parent ? std::string(";parent=") + parent : ""));
  return doctest::description(storage.back().c_str());
}

std::uint64_t seed() {
  const char* s = std::getenv("COURSE_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 1;
}

void skip(const std::string& reason) {
  current_skip() = Skip{true, reason};
  throw SkipCheck(reason);
}

void award_fraction(double fraction, const std::string& note) {
  Award& a = current_award();
  a.set = true;
  a.fraction = std::min(1.0, std::max(0.0, fraction));
  a.note = note;
}

std::string Case::describe() const {
  std::string s = what + ", " + dtype + ", shape " + shape_string(shape) + ", seed " +
                  std::to_string(this->seed.value_or(grading::seed()));
  if (!inputs.empty()) s += ", " + inputs;
  return s;
}

bool expect_within(const Case& c, const ErrorStats& stats, const Tolerance& tol) {
  const bool ok = stats.bad_count == 0 && stats.max_abs <= tol.limit;
  const double ratio = tol.limit > 0 ? stats.max_abs / tol.limit : 0;
  if (ok && ratio > closest().ratio) {
    char share[32];
    std::snprintf(share, sizeof share, "%.0f%% of the band", 100 * ratio);
    closest() = {ratio, c.describe() + ": " + stats.summary() + "; " + share + " (" +
                            tol.explain.substr(0, tol.explain.find(" [")) + ")"};
  }
  if (!ok) {
    const std::string why =
        stats.bad_count ? stats.nonfinite_summary() : "max abs error exceeds the band";
    FAIL_CHECK(c.describe() << ": " << why << "; " << stats.summary() << "; " << tol.explain);
  }
  return ok;
}

int failures_in_this_check() { return failure_count(); }

void fail_first(const Case& c, const std::string& message) {
  lead_failure() = c.describe() + ": " + message;
  FAIL_CHECK(lead_failure());
}

bool expect(bool ok, const Case& c, const std::string& message) {
  if (!ok) FAIL_CHECK(c.describe() << ": " << message);
  return ok;
}

}  // namespace grading
