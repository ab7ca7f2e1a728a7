// course_runner: runs each lab's grader in its own process with a time limit and turns what the
// graders report into a scoreboard, Gradescope's results.json and JUnit XML.
//
//   course_runner grade  --manifest FILE [--labs 1,3] [--solutions] [--seed S] [--timeout SEC]
//                        [--out DIR] [--verbose]
//   course_runner expect --binary PATH (--full-marks | --fail CHECK [--message TEXT])
//                        [--seed S] [--timeout SEC]
//   course_runner list   --binary PATH      (each check's points and name)
//
// `grade` is what `./course grade` calls. `expect` is what the project's own tests call: the
// solution must earn full marks, and each planted bug must fail the check it was planted for,
// for the reason it was planted for. A crash or hang costs the lab it happens in, never the run.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// What a grader reports (see grader/common/grading.cpp, ResultsListener).

struct Check {
  std::string name;
  int points = 0;
  std::string parent;
  std::string status = "not run";  // pass | partial | fail | skip | not run
  std::string message;
  double seconds = 0;
  double credit = 0;  // the share of the points earned: 1 for pass, 0..1 for partial
  double earned() const { return status == "pass" ? points : status == "partial" ? points * credit : 0; }
};

struct LabResult {
  int number = 0;
  std::string name;
  std::vector<Check> checks;
  std::string problem;  // "", or why the lab did not run to the end (crash, timeout, build)
  double seconds = 0;
  double earned() const {
    double e = 0;
    for (const auto& c : checks) e += c.earned();
    return e;
  }
  int possible() const {
    int p = 0;
    for (const auto& c : checks) p += c.points;
    return p;
  }
  int count(const std::string& status) const {
    int n = 0;
    for (const auto& c : checks) n += c.status == status;
    return n;
  }
};

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
    if (key == "points") c.points = std::atoi(value.c_str());
    if (key == "parent") c.parent = value;
  }
}

// ---------------------------------------------------------------------------------------------
// Running a grader process.

struct ProcessOutcome {
  bool timed_out = false;
  int exit_code = 0;   // when it exited
  int signal = 0;      // when a signal killed it
  double seconds = 0;
};

ProcessOutcome run_process(const std::vector<std::string>& argv, const std::string& log_path,
                           const std::vector<std::string>& env, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // its own process group, so a timeout kills everything it started
    if (!log_path.empty()) {
      FILE* log = std::fopen(log_path.c_str(), "w");
      if (log) {
        dup2(fileno(log), 1);
        dup2(fileno(log), 2);
      }
    }
    for (const auto& kv : env) putenv(strdup(kv.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::perror(("cannot run " + argv[0]).c_str());
    _exit(127);
  }
  ProcessOutcome out;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    out.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r == pid) break;
    if (out.seconds > timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      out.timed_out = true;
      return out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  return out;
}

std::string temp_path(const std::string& dir, const std::string& name) {
  return dir + "/" + name;
}

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// Asks a grader for its checks and their points, without running them.
LabResult list_checks(const std::string& binary, int number, const std::string& name,
                      const std::string& work_dir) {
  LabResult lab;
  lab.number = number;
  lab.name = name;
  const std::string list_file = temp_path(work_dir, name + ".checks.tsv");
  std::remove(list_file.c_str());
  const auto listed = run_process({binary, "--list-test-cases", "--no-version"}, "/dev/null",
                                  {"COURSE_RESULTS=" + list_file}, 30);
  std::ifstream list_in(list_file);
  std::string line;
  while (std::getline(list_in, line)) {
    const auto f = split(line, '\t');
    if (f.size() < 2 || f[0] != "check") continue;
    Check c;
    c.name = f[1];
    parse_description(f.size() > 2 ? f[2] : "", c);
    lab.checks.push_back(c);
  }
  if (lab.checks.empty())
    lab.problem = listed.signal ? "the grader crashed while listing its checks"
                                : "the grader listed no checks (is it a course grader?)";
  return lab;
}

// Lists the grader's checks, runs it, and fills in what happened to every check.
LabResult grade_binary(const std::string& binary, int number, const std::string& name,
                       const std::string& seed, double timeout_s, const std::string& work_dir) {
  LabResult lab = list_checks(binary, number, name, work_dir);
  if (lab.checks.empty()) return lab;
  const std::string results_file = temp_path(work_dir, name + ".results.tsv");
  const std::string log_file = temp_path(work_dir, name + ".log");
  std::remove(results_file.c_str());
  std::string line;

  const auto run = run_process({binary, "--no-version"}, log_file,
                               {"COURSE_RESULTS=" + results_file, "COURSE_SEED=" + seed},
                               timeout_s);
  lab.seconds = run.seconds;

  std::map<std::string, Check*> by_name;
  for (auto& c : lab.checks) by_name[c.name] = &c;
  std::string running;     // the check that started but did not end
  std::string last_ended;  // doctest reports a fatal signal as the check's end, then dies
  std::ifstream res_in(results_file);
  while (std::getline(res_in, line)) {
    const auto f = split(line, '\t');
    if (f.size() >= 2 && f[0] == "start") running = f[1];
    if (f.size() >= 5 && f[0] == "end" && by_name.count(f[1])) {
      Check& c = *by_name[f[1]];
      c.status = f[2];
      c.seconds = std::atof(f[3].c_str());
      c.message = unescape(f[4]);
      c.credit = f.size() >= 6 ? std::atof(f[5].c_str()) : (c.status == "pass" ? 1.0 : 0.0);
      running.clear();
      last_ended = f[1];
    }
  }
  bool unfinished = !running.empty();
  for (const auto& c : lab.checks) unfinished |= c.status == "not run";
  // doctest reports a fatal signal as the end of the check it hit, then the process dies (or,
  // under a sanitizer, exits): the check that ended last is the one that was running.
  if ((run.signal || unfinished) && running.empty()) running = last_ended;
  std::string what;
  if (run.timed_out) what = "timed out after " + std::to_string(int(timeout_s)) + " s";
  else if (run.signal) what = std::string("crashed (") + strsignal(run.signal) + ")";
  else if (unfinished)  // e.g. exit() in lab code, or a sanitizer that reported an error
    what = "exited early (exit code " + std::to_string(run.exit_code) + ")";
  if (!what.empty()) {
    lab.problem = what + (running.empty() ? "" : " during \"" + running + "\"") + "; log: " +
                  log_file;
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
    auto it = by_name.find(c.parent);
    if (it == by_name.end() || it->second->status == "pass") continue;
    if (it->second->status == "skip") {
      c.status = "skip";
      c.message = "parent skipped: \"" + c.parent + "\": " + it->second->message;
    } else {
      c.status = "fail";
      c.message = "parent failed: \"" + c.parent + "\"";
    }
  }
  return lab;
}

// ---------------------------------------------------------------------------------------------
// Output: scoreboard, results.json, JUnit XML.

std::string first_line(const std::string& s, std::size_t max = 400) {
  std::string l = s.substr(0, s.find('\n'));
  return l.size() > max ? l.substr(0, max) + "..." : l;
}

// Points as people write them: "20", or "17.5" for partial credit.
std::string pts(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, x == double(long(x)) ? "%.0f" : "%.1f", x);
  return buf;
}

void print_scoreboard(const std::vector<LabResult>& labs, bool verbose, const std::string& seed) {
  double earned = 0;
  int possible = 0, skipped_points = 0;
  std::printf("\n%-4s %-22s %9s  %s\n", "lab", "name", "score", "status");
  std::printf("%s\n", std::string(72, '-').c_str());
  for (const auto& lab : labs) {
    int skip_pts = 0;
    for (const auto& c : lab.checks) skip_pts += c.status == "skip" ? c.points : 0;
    std::string status;
    if (!lab.problem.empty()) status = lab.problem;
    else if (lab.count("fail")) status = std::to_string(lab.count("fail")) + " of " +
                                         std::to_string(lab.checks.size()) + " checks failed";
    else if (lab.count("skip") == int(lab.checks.size()))
      status = "skipped: " + first_line(lab.checks.front().message, 120);
    else if (lab.count("partial")) status = std::to_string(lab.count("partial")) + " of " +
                                            std::to_string(lab.checks.size()) + " checks partial";
    else status = "all checks passed";
    if (lab.count("skip") && lab.count("skip") < int(lab.checks.size()))
      status += " (" + std::to_string(lab.count("skip")) + " skipped)";
    char score[32];
    if (lab.checks.empty()) std::snprintf(score, sizeof score, "-");
    else if (lab.count("skip") == int(lab.checks.size())) std::snprintf(score, sizeof score, "skip/%d", lab.possible());
    else std::snprintf(score, sizeof score, "%s/%d", pts(lab.earned()).c_str(), lab.possible());
    std::printf("%-4d %-22s %9s  %s\n", lab.number, lab.name.c_str(), score, status.c_str());
    earned += lab.earned();
    possible += lab.possible();
    skipped_points += skip_pts;
    for (const auto& c : lab.checks) {
      const bool show = c.status == "fail" || c.status == "partial" || verbose;
      if (!show) continue;
      const std::string msg = verbose ? c.message : first_line(c.message);
      std::printf("     %-5s %s [%d pt%s]%s%s\n", c.status == "pass" ? "ok" : c.status.c_str(),
                  c.name.c_str(), c.points, c.points == 1 ? "" : "s", msg.empty() ? "" : "\n           ",
                  msg.c_str());
    }
  }
  std::printf("%s\n", std::string(72, '-').c_str());
  std::printf("Score: %s/%d", pts(earned).c_str(), possible);
  if (skipped_points) std::printf("  (%d points skipped: their checks could not run here)", skipped_points);
  std::printf("   seed %s\n", seed.c_str());
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += char(c);
        }
    }
  }
  return o;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// Gradescope's autograder schema: https://gradescope-autograders.readthedocs.io (results.json).
void write_results_json(const std::vector<LabResult>& labs, const std::string& path,
                        const std::string& seed) {
  std::ofstream out(path);
  double earned = 0, secs = 0;
  for (const auto& l : labs) earned += l.earned(), secs += l.seconds;
  out << "{\n  \"score\": " << earned << ",\n  \"execution_time\": " << secs
      << ",\n  \"output\": \"seed " << seed << "\",\n  \"tests\": [\n";
  bool first = true;
  for (const auto& lab : labs)
    for (const auto& c : lab.checks) {
      out << (first ? "" : ",\n") << "    {\"name\": \"" << json_escape(c.name)
          << "\", \"number\": \"" << lab.number << "\", \"score\": "
          << c.earned() << ", \"max_score\": " << c.points
          << ", \"status\": \"" << (c.status == "pass" ? "passed" : "failed")
          << "\", \"tags\": [\"lab" << lab.number << "\"" << (c.status == "skip" ? ", \"skipped\"" : "")
          << "], \"output\": \"" << json_escape((c.status == "skip" ? "SKIPPED: " : "") + c.message)
          << "\"}";
      first = false;
    }
  out << "\n  ]\n}\n";
}

void write_junit(const std::vector<LabResult>& labs, const std::string& path) {
  std::ofstream out(path);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
  for (const auto& lab : labs) {
    out << "  <testsuite name=\"lab" << lab.number << " " << xml_escape(lab.name) << "\" tests=\""
        << lab.checks.size() << "\" failures=\"" << lab.count("fail") << "\" skipped=\""
        << lab.count("skip") << "\" time=\"" << lab.seconds << "\">\n";
    for (const auto& c : lab.checks) {
      out << "    <testcase classname=\"lab" << lab.number << "\" name=\"" << xml_escape(c.name)
          << "\" time=\"" << c.seconds << "\">";
      if (c.status == "fail")
        out << "<failure message=\"" << xml_escape(first_line(c.message)) << "\">"
            << xml_escape(c.message) << "</failure>";
      if (c.status == "skip") out << "<skipped message=\"" << xml_escape(c.message) << "\"/>";
      out << "</testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
}

// ---------------------------------------------------------------------------------------------
// Command line.

struct Args {
  std::string mode, manifest, binary, seed = "1", out = "out", labs, fail_check, message;
  bool solutions = false, full_marks = false, verbose = false;
  double timeout = 120;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "course_runner: %s\nusage: course_runner grade --manifest FILE [--labs 1,2] "
               "[--solutions] [--seed S] [--timeout SEC] [--out DIR] [--verbose]\n"
               "       course_runner expect --binary PATH (--full-marks | --fail CHECK "
               "[--message TEXT]) [--seed S]\n",
               why.c_str());
  std::exit(2);
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

Args parse(int argc, char** argv) {
  if (argc < 2) usage("no mode given");
  Args a;
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(k + " needs a value");
      return argv[++i];
    };
    if (k == "--manifest") a.manifest = value();
    else if (k == "--binary") a.binary = value();
    else if (k == "--seed") a.seed = value();
    else if (k == "--out") a.out = value();
    else if (k == "--labs") a.labs = value();
    else if (k == "--fail") a.fail_check = value();
    else if (k == "--message") a.message = value();
    else if (k == "--timeout") a.timeout = std::atof(value().c_str());
    else if (k == "--solutions") a.solutions = true;
    else if (k == "--full-marks") a.full_marks = true;
    else if (k == "--verbose") a.verbose = true;
    else usage("unknown option " + k);
  }
  if (!all_digits(a.seed) || a.seed.size() > 19)
    usage("--seed takes a whole number from 0 to 999999999999999999, not '" + a.seed + "'");
  if (a.timeout <= 0) usage("--timeout takes a positive number of seconds");
  return a;
}

struct ManifestEntry {
  int number;
  std::string name, kind, student, solution, note;
};

std::vector<ManifestEntry> read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) usage("cannot read the manifest " + path + " (was the project configured?)");
  std::vector<ManifestEntry> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split(line, '\t');
    if (f.size() < 6 || line[0] == '#') continue;
    out.push_back({std::atoi(f[0].c_str()), f[1], f[2], f[3], f[4], f[5]});
  }
  return out;
}

int grade(const Args& a) {
  const auto manifest = read_manifest(a.manifest);
  std::vector<int> wanted;
  if (!a.labs.empty())
    for (const auto& s : split(a.labs, ',')) {
      bool known = false;
      for (const auto& m : manifest) known |= std::to_string(m.number) == s;
      if (!known) {
        std::string list;
        for (const auto& m : manifest) list += " " + std::to_string(m.number);
        usage("there is no lab '" + s + "'; labs are:" + list);
      }
      wanted.push_back(std::atoi(s.c_str()));
    }
  mkdir(a.out.c_str(), 0755);
  std::vector<LabResult> labs;
  for (const auto& m : manifest) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), m.number) == wanted.end())
      continue;
    const std::string binary = a.solutions ? m.solution : m.student;
    std::printf("[course] grading lab %d (%s%s)...\n", m.number, m.name.c_str(),
                a.solutions ? ", solution" : "");
    std::fflush(stdout);
    LabResult lab;
    if (file_exists(binary)) {
      lab = grade_binary(binary, m.number, m.name, a.seed, a.timeout, a.out);
    } else {
      lab.number = m.number;
      lab.name = m.name;
      // Show what the lab is worth even though it could not be built: list the solution's checks.
      if (file_exists(m.solution)) {
        lab = list_checks(m.solution, m.number, m.name, a.out);
        for (auto& c : lab.checks) {
          c.status = m.kind == "gpu" && m.note != "-" ? "skip" : "fail";
          c.message = m.note != "-" ? m.note : "the lab did not build";
        }
      }
      lab.problem = m.note != "-" ? m.note
                                  : "build failed: see the compiler errors above (or " + a.out +
                                        "/build-lab" + std::to_string(m.number) + ".log)";
    }
    labs.push_back(lab);
  }
  print_scoreboard(labs, a.verbose, a.seed);
  write_results_json(labs, a.out + "/results.json", a.seed);
  write_junit(labs, a.out + "/junit.xml");
  std::printf("Results: %s/results.json (Gradescope), %s/junit.xml; logs in %s/\n", a.out.c_str(),
              a.out.c_str(), a.out.c_str());
  for (const auto& l : labs)
    if (l.count("fail") || (l.checks.empty() && !l.problem.empty())) return 1;
  return 0;
}

// For ctest: 0 = as expected, 1 = not as expected, 77 = everything skipped (ctest SKIP).
int expect(const Args& a) {
  if (a.binary.empty()) usage("expect needs --binary");
  if (!a.full_marks && a.fail_check.empty()) usage("expect needs --full-marks or --fail CHECK");
  char tmpl[] = "/tmp/course_expect.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const LabResult lab = grade_binary(a.binary, 0, "expect", a.seed, a.timeout, dir);
  for (const auto& c : lab.checks)
    std::printf("  %-5s %s%s%s\n", c.status.c_str(), c.name.c_str(), c.message.empty() ? "" : "\n        ",
                first_line(c.message, 1000).c_str());
  if (!lab.problem.empty()) std::printf("  problem: %s\n", lab.problem.c_str());
  if (lab.checks.empty()) return 1;
  if (lab.count("skip") == int(lab.checks.size())) {
    std::printf("every check was skipped: %s\n", first_line(lab.checks[0].message).c_str());
    return 77;
  }
  if (a.full_marks) {
    const bool ok = lab.count("fail") == 0 && lab.count("partial") == 0 && lab.problem.empty();
    std::printf("%s: %s/%d points\n", ok ? "full marks" : "NOT full marks", pts(lab.earned()).c_str(), lab.possible());
    return ok ? 0 : 1;
  }
  for (const auto& c : lab.checks) {
    if (c.name != a.fail_check) continue;
    if (c.status == "skip") return 77;
    if (c.status != "fail") {
      std::printf("expected \"%s\" to fail, but it %s\n", c.name.c_str(), c.status == "pass" ? "passed" : c.status.c_str());
      return 1;
    }
    if (c.message.find(a.message) == std::string::npos) {
      std::printf("\"%s\" failed, but not for the planted reason: its message lacks \"%s\"\n",
                  c.name.c_str(), a.message.c_str());
      return 1;
    }
    std::printf("rejected as expected: \"%s\" failed with a message containing \"%s\"\n",
                c.name.c_str(), a.message.c_str());
    return 0;
  }
  std::printf("the grader has no check named \"%s\"\n", a.fail_check.c_str());
  return 1;
}

}  // namespace

// Prints "points<TAB>name" per check: what a lab README's table of checks must list.
int list(const Args& a) {
  if (a.binary.empty()) usage("list needs --binary");
  char tmpl[] = "/tmp/course_list.XXXXXX";
  const LabResult lab = list_checks(a.binary, 0, "list", mkdtemp(tmpl));
  for (const auto& c : lab.checks) std::printf("%d\t%s\n", c.points, c.name.c_str());
  return lab.checks.empty() ? 1 : 0;
}

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.mode == "list") return list(a);
  if (a.mode == "grade") {
    if (a.manifest.empty()) usage("grade needs --manifest");
    return grade(a);
  }
  if (a.mode == "expect") return expect(a);
  usage("unknown mode '" + a.mode + "'");
}
