#include "results.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "process.hpp"
#include "report.hpp"
#include "wire.hpp"

namespace runner {

double Check::earned() const {
  return status == "pass" ? points : status == "partial" ? points * credit : 0;
}

double LabResult::earned() const {
  double e = 0;
  for (const auto& c : checks) e += c.earned();
  return std::min(e, double(possible()));
}

int LabResult::possible() const {
  int p = 0;
  for (const auto& c : checks) p += c.points;
  return p;
}

int LabResult::count(const std::string& status) const {
  return int(std::count_if(checks.begin(), checks.end(), [&](const Check& c) { return c.status == status; }));
}

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// "points=2;parent=softmax: fp32 within band"
void parse_description(const std::string& desc, Check& c) {
  for (const auto& kv : split(desc, ';')) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "points") c.points = std::max(0, std::atoi(value.c_str()));
    if (key == "parent") c.parent = value;
  }
}

std::vector<std::string> lines(const std::string& text) { return split(text, '\n'); }

double clamp01(double x) { return std::isfinite(x) ? std::clamp(x, 0.0, 1.0) : 0.0; }

// What the lab's code printed (its process writes the file itself, so it may hold anything: a
// submission that prints "\x1b[31m" colours, or worse drives, the terminal of whoever `cat`s the
// log), rewritten with every control character but newline and tab shown, not acted on
// (isolation::visible_text), and no larger than the lab process may make it (COURSE_LOG_LIMIT).
// Called once grading has ended, when no lab process is left to write to it. Not followed through
// a link, and a file that is not a plain one (a FIFO would hold the runner) is removed.
void make_log_harmless(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return;  // no lab process was started
  struct stat st {};
  const bool regular = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const char* limit_env = std::getenv("COURSE_LOG_LIMIT");  // as the lab process has it
  const std::size_t limit = limit_env && std::atol(limit_env) >= 1024 ? std::size_t(std::atol(limit_env)) : 1u << 20;
  std::string text;
  char buf[65536];
  // Every byte read shows as one byte or more, so what lies past the limit would not be shown.
  for (ssize_t n; regular && text.size() < limit && (n = read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, std::size_t(n));
  if (fd >= 0) close(fd);
  if (!regular) {  // a link, a FIFO: no log of the grader's making
    std::remove(path.c_str());
    return;
  }
  try {
    write_atomically(path, isolation::visible_text(text, limit - 64));  // room for "... [truncated]"
  } catch (...) {
    std::remove(path.c_str());  // never leave the raw text for want of the harmless one
    throw;
  }
}

}  // namespace

namespace {
// The grader's command line: doctest's own filter leaves the excluded checks out of both the
// list and the run.
std::vector<std::string> grader_command(const std::string& grader, const std::string& exclude,
                                        const std::string& only, std::vector<std::string> args) {
  args.insert(args.begin(), grader);
  if (!exclude.empty()) args.push_back("--test-case-exclude=" + exclude);
  if (!only.empty()) args.push_back("--test-case=" + only);
  return args;
}
}  // namespace

LabResult list_checks(const std::string& grader, const std::string& work_dir, const std::string& exclude,
                      const std::string& only) {
  LabResult lab;
  const auto listed = run_grader(grader_command(grader, exclude, only, {"--list-test-cases", "--no-version"}),
                                 work_dir + "/list.log", {}, 60);
  for (const auto& line : lines(listed.channel)) {
    const auto f = split(line, '\t');
    if (f.size() < 2 || f[0] != "check") continue;
    Check c;
    c.name = isolation::safe_text(f[1], 300, false);
    parse_description(f.size() > 2 ? f[2] : "", c);
    lab.checks.push_back(c);
  }
  if (lab.checks.empty())
    lab.problem = listed.signal ? "the grader crashed while listing its checks"
                                : "the grader listed no checks (is it a course grader?)";
  // A parent that names no check is a mistake in the grader, not something to pass over: an
  // unknown parent would otherwise remove the gating silently.
  for (const auto& c : lab.checks) {
    if (c.parent.empty()) continue;
    const bool known = std::any_of(lab.checks.begin(), lab.checks.end(),
                                   [&](const Check& p) { return p.name == c.parent; });
    if (!known)
      lab.problem = "grader configuration error: the check \"" + c.name + "\" names the parent \"" +
                    c.parent + "\", which is not a check of this grader";
  }
  return lab;
}

void fail_all(LabResult& lab, const std::string& status, const std::string& why) {
  for (auto& c : lab.checks) {
    c.status = status;
    c.message = why;
  }
}

LabResult grade(const GradeRequest& r) {
  mkdir(r.work_dir.c_str(), 0755);
  const std::string scratch = r.work_dir + "/scratch";
  mkdir(scratch.c_str(), 0755);
  LabResult lab = list_checks(r.grader, r.work_dir, r.exclude, r.only);
  if (lab.checks.empty() || !lab.problem.empty()) {
    fail_all(lab, "fail", lab.problem);
    return lab;
  }
  const std::string log_file = r.work_dir + "/grader.log";
  std::vector<std::string> env = {"COURSE_SEED=" + r.seed, "COURSE_WORKER=" + r.worker,
                                  "COURSE_SOLUTION_WORKER=" + r.solution_worker, "COURSE_SCRATCH=" + scratch,
                                  "COURSE_LAB_LOG=" + r.work_dir + "/lab-process.log"};
  if (!r.gpu_lock.empty()) env.push_back("COURSE_GPU_LOCK=" + r.gpu_lock);
  const auto run = run_grader(grader_command(r.grader, r.exclude, r.only, {"--no-version"}), log_file, env,
                              r.timeout_s);
  lab.seconds = run.seconds;
  make_log_harmless(r.work_dir + "/lab-process.log");

  std::map<std::string, Check*> by_name;
  for (auto& c : lab.checks) by_name[c.name] = &c;
  std::string running;     // the check that started but did not end
  std::string last_ended;  // doctest reports a fatal signal as the check's end, then dies
  for (const auto& line : lines(run.channel)) {
    const auto f = split(line, '\t');
    if (f.size() >= 2 && f[0] == "start") running = f[1];
    if (f.size() >= 3 && f[0] == "figures" && by_name.count(f[1]))
      by_name[f[1]]->figures = isolation::safe_text(unescape(f[2]), 2000);
    if (f.size() >= 5 && f[0] == "end" && by_name.count(f[1])) {
      Check& c = *by_name[f[1]];
      const std::string status = f[2];
      c.status = (status == "pass" || status == "partial" || status == "fail" || status == "skip") ? status : "fail";
      c.seconds = std::atof(f[3].c_str());
      c.message = isolation::safe_text(unescape(f[4]), 4096);
      c.credit = clamp01(f.size() >= 6 ? std::atof(f[5].c_str()) : (c.status == "pass" ? 1.0 : 0.0));
      if (c.status == "partial" && c.credit >= 1.0) c.status = "pass";
      running.clear();
      last_ended = f[1];
    }
  }
  bool unfinished = !running.empty();
  for (const auto& c : lab.checks) unfinished |= c.status == "not run";
  // A crash: doctest reports the end of the check it crashed in, as a failure, before the process
  // dies (by the signal, or by an exit under a sanitizer), so that check is to blame. A check
  // that ended without failing is never blamed: the process ended after it (a time limit or an
  // exit between two checks), and its result stands.
  bool last_failed = false;
  for (const auto& c : lab.checks) last_failed |= c.name == last_ended && c.status == "fail";
  if ((run.signal || unfinished) && running.empty() && last_failed) running = last_ended;
  std::string what;
  if (run.timed_out)
    what = "timed out after " + std::to_string(int(r.timeout_s)) + " s" +
           (run.killed_calls_s > 0 ? " (not counting " + std::to_string(int(run.killed_calls_s + 0.5)) +
                                         " s in calls killed at their own time limit)"
                                   : "");
  else if (run.signal) what = std::string("crashed (") + strsignal(run.signal) + ")";
  else if (unfinished) what = "exited early (exit code " + std::to_string(run.exit_code) + ")";
  if (!what.empty()) {
    lab.problem = what + (running.empty() ? "" : " during \"" + running + "\"") + "; log: " + log_file;
    for (auto& c : lab.checks) {
      if (c.name == running) {
        c.status = "fail";
        c.message = what + " during this check (the rest of the lab could not run)" +
                    (c.message.empty() ? "" : ": " + c.message);
      } else if (c.status == "not run") {
        c.status = "fail";
        c.message = "not run: the grader " + what + (running.empty() ? "" : " in \"" + running + "\"");
      }
    }
  }

  // A check whose parent did not pass earns nothing, whatever it did itself.
  for (auto& c : lab.checks) {
    if (c.parent.empty()) continue;
    const Check& parent = *by_name.at(c.parent);  // list_checks vetted every parent
    if (parent.status == "pass") continue;
    if (parent.status == "skip") {
      c.status = "skip";
      c.message = "parent skipped: \"" + c.parent + "\": " + parent.message;
    } else {
      c.status = "fail";
      c.message = "parent failed: \"" + c.parent + "\"";
    }
  }
  return lab;
}

}  // namespace runner
