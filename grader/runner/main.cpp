// course_runner: grades each lab in its own processes and turns what the trusted graders report
// into a scoreboard, Gradescope's results.json, JUnit XML and scores.tsv.
//
//   course_runner grade  --manifest FILE [--workers DIR] [--labs 1,3] [--solutions] [--seed S]
//                        [--timeout SEC] [--out DIR] [--verbose]
//   course_runner expect --binary GRADER --worker LAB_PROCESS [--solution-worker LAB_PROCESS]
//                        (--full-marks [--seeds 1-20] | (--fail | --short-of-full) CHECK [--message TEXT]
//                         | --earns CHECK)
//                        [--seed S] [--timeout SEC] [--exclude 'speed:*'] [--only 'gpu:*']
//   course_runner list   --binary GRADER      (each check's points and name)
//   course_runner gradebook --results DIR --names FILE --labs 1,2,3 --out gradebook.csv
//                        (FILE: the submissions' names, each ended by a NUL byte)
//
// A lab is graded by two processes: the trusted grader (grader/labN_*/grade_labN, which holds
// the checks, their points, the reference and the bands, and reports results on a pipe only the
// runner reads) and the untrusted lab process it starts (the code being graded; see
// grader/isolation/). `grade` is what `./course grade` calls; `expect` is what the project's own
// tests call: a solution or correct variant must earn full marks (at every seed asked for), a
// planted bug must fail the check it was planted for, for the reason it was planted for
// (--short-of-full: must not earn that check's full points, e.g. a speed check graded on a
// sliding scale, where an honest result for the planted code is partial credit); a partial
// submission (a staircase lab with its later steps not written) must earn the points of the
// steps it has (--earns: that check passes, whatever the others do).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gradebook.hpp"
#include "process.hpp"
#include "report.hpp"
#include "results.hpp"
#include "wire.hpp"

namespace {

using runner::LabResult;

struct Args {
  std::string mode, manifest, workers, binary, worker, solution_worker, seed = "1", seeds, out = "out", labs,
      fail_check, earns_check, message, exclude, only, results, names;
  bool solutions = false, full_marks = false, verbose = false,
       partial_rejects = false;  // --short-of-full: partial credit on fail_check counts as rejected
  double timeout = 120;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "course_runner: %s\nusage: course_runner grade --manifest FILE [--workers DIR] [--labs 1,2] "
               "[--solutions] [--seed S] [--timeout SEC] [--out DIR] [--verbose]\n"
               "       course_runner expect --binary GRADER --worker LAB_PROCESS [--solution-worker P] "
               "(--full-marks [--seeds A-B] | (--fail | --short-of-full) CHECK [--message TEXT] | --earns CHECK) "
               "[--seed S] [--exclude GLOB] [--only GLOB]\n"
               "       course_runner list --binary GRADER\n"
               "       course_runner gradebook --results DIR --names FILE --labs 1,2 --out FILE\n",
               why.c_str());
  std::exit(2);
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos;
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
    else if (k == "--workers") a.workers = value();
    else if (k == "--binary") a.binary = value();
    else if (k == "--worker") a.worker = value();
    else if (k == "--solution-worker") a.solution_worker = value();
    else if (k == "--seed") a.seed = value();
    else if (k == "--seeds") a.seeds = value();
    else if (k == "--out") a.out = value();
    else if (k == "--labs") a.labs = value();
    else if (k == "--fail") a.fail_check = value();
    else if (k == "--short-of-full") {
      a.fail_check = value();
      a.partial_rejects = true;
    }
    else if (k == "--earns") a.earns_check = value();
    else if (k == "--message") a.message = value();
    else if (k == "--exclude") a.exclude = value();
    else if (k == "--only") a.only = value();
    else if (k == "--results") a.results = value();
    else if (k == "--names") a.names = value();
    else if (k == "--timeout") a.timeout = std::atof(value().c_str());
    else if (k == "--solutions") a.solutions = true;
    else if (k == "--full-marks") a.full_marks = true;
    else if (k == "--verbose") a.verbose = true;
    else usage("unknown option " + k);
  }
  if (!all_digits(a.seed)) usage("--seed takes a whole number from 0 to 999999999999999999, not '" + a.seed + "'");
  if (a.timeout <= 0) usage("--timeout takes a positive number of seconds");
  return a;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

bool file_exists(const std::string& p) {
  struct stat st;
  return !p.empty() && stat(p.c_str(), &st) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// graders.tsv, written by the configure step: number, folder, cpu|gpu, trusted grader, the
// solution's lab process, and why the lab is not built here ("-" when it is).
struct ManifestEntry {
  int number;
  std::string name, kind, grader, solution_worker, note;
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

// One lab of `grade`: the student's lab process comes from --workers DIR (labN_worker, or
// labN.build-failed holding why it did not build), the solution's from the manifest.
LabResult grade_lab(const Args& a, const ManifestEntry& m) {
  // A fresh folder: an earlier run's logs (a grader.log saying "not implemented" under a lab that
  // now does not build) must not be read as this run's.
  const std::string work_dir = a.out + "/lab" + std::to_string(m.number);
  std::error_code ignored;
  std::filesystem::remove_all(work_dir, ignored);
  mkdir(work_dir.c_str(), 0755);
  LabResult lab;
  if (m.note != "-" || !file_exists(m.grader)) {
    lab.problem = m.note != "-" ? m.note : "the grader was not built";
  } else {
    const std::string prefix = a.workers + "/lab" + std::to_string(m.number);
    const std::string worker = a.solutions ? m.solution_worker : prefix + "_worker";
    if (!a.solutions && (file_exists(prefix + ".build-failed") || !file_exists(worker))) {
      // Show what the lab is worth although it could not be built: the trusted grader lists it.
      lab = runner::list_checks(m.grader, work_dir);
      // Its lines kept: the compiler's error with its context and notes (./course build_errors).
      std::string why = isolation::safe_text(read_file(prefix + ".build-failed"), 3000, true);
      while (!why.empty() && (why.back() == ' ' || why.back() == '\n')) why.pop_back();
      if (why.empty()) why = "the lab was not built";
      const auto starts = [&](const char* s) { return why.rfind(s, 0) == 0; };
      if (starts("not built here")) {  // the machine's doing, not the student's
        runner::fail_all(lab, "skip", why);
        lab.problem = why;
      } else if (starts("no folder") || starts("missing from the submission") || starts("not graded:")) {
        runner::fail_all(lab, "fail", "your lab was not graded: " + why);  // nothing to build
        lab.problem = why;
      } else {
        // The error once, with the lab (the scoreboard's lab line, results.json's output), not
        // under each of its checks.
        runner::fail_all(lab, "fail", "not run: your lab did not build (the compiler's error is shown once, with the lab)");
        lab.problem = "build failed: " + why;
      }
    } else {
      runner::GradeRequest request{m.grader, worker, m.solution_worker, a.seed, a.timeout, work_dir};
      const char* gpu_lock = std::getenv("COURSE_GPU_LOCK");  // set by ./course where a GPU is shared
      if (m.kind == "gpu" && gpu_lock) request.gpu_lock = gpu_lock;
      lab = runner::grade(request);
    }
  }
  lab.number = m.number;
  lab.name = m.name;
  if (m.kind == "gpu" && lab.checks.empty() && m.note != "-") lab.problem = m.note;
  return lab;
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
  if (!a.solutions && a.workers.empty()) usage("grade needs --workers DIR (or --solutions)");
  std::filesystem::create_directories(a.out);
  runner::become_subreaper();
  std::vector<LabResult> labs;
  for (const auto& m : manifest) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), m.number) == wanted.end()) continue;
    std::printf("[course] grading lab %d (%s%s)...\n", m.number, m.name.c_str(), a.solutions ? ", solution" : "");
    std::fflush(stdout);
    labs.push_back(grade_lab(a, m));
  }
  runner::print_scoreboard(labs, a.verbose, a.seed);
  runner::write_results_json(labs, a.out + "/results.json", a.seed);
  runner::write_junit(labs, a.out + "/junit.xml");
  runner::write_scores_tsv(labs, a.out + "/scores.tsv");
  std::printf("Results: %s/results.json (Gradescope), %s/junit.xml, %s/scores.tsv; logs in %s/labN/\n",
              a.out.c_str(), a.out.c_str(), a.out.c_str(), a.out.c_str());
  for (const auto& l : labs)
    if (l.count("fail") || l.count("partial") || (l.checks.empty() && !l.problem.empty() && l.problem.find("not built") == std::string::npos))
      return 1;
  return 0;
}

// "1-20" or "3,5,9" -> the seeds.
std::vector<std::string> seed_list(const Args& a) {
  if (a.seeds.empty()) return {a.seed};
  std::vector<std::string> out;
  for (const auto& part : split(a.seeds, ',')) {
    const auto dash = part.find('-');
    if (dash == std::string::npos) {
      if (!all_digits(part)) usage("--seeds takes A-B or a list like 1,2,3");
      out.push_back(part);
      continue;
    }
    const std::string lo = part.substr(0, dash), hi = part.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi)) usage("--seeds takes A-B or a list like 1,2,3");
    for (long s = std::atol(lo.c_str()); s <= std::atol(hi.c_str()); ++s) out.push_back(std::to_string(s));
  }
  return out;
}

// A temporary folder for logs, removed when the command ends.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/course_runner.XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

void print_checks(const LabResult& lab) {
  for (const auto& c : lab.checks)
    std::printf("  %-7s %s%s%s\n", c.status.c_str(), c.name.c_str(), c.message.empty() ? "" : "\n          ",
                runner::first_line(c.message, 1000).c_str());
  if (!lab.problem.empty()) std::printf("  problem: %s\n", lab.problem.c_str());
}

// " (checks matching 'speed:*' left out)", or what --only kept, or "".
std::string filter_note(const Args& a) {
  std::string note;
  if (!a.exclude.empty()) note += " (checks matching '" + a.exclude + "' left out)";
  if (!a.only.empty()) note += " (only the checks matching '" + a.only + "')";
  return note;
}

// The check named `name`, or null when the grader has none.
const runner::Check* find_check(const LabResult& lab, const std::string& name) {
  for (const auto& c : lab.checks)
    if (c.name == name) return &c;
  return nullptr;
}

// --earns: the check passed (its full points), whatever the lab's other checks did.
int expect_earned(const runner::Check& c, const LabResult& lab) {
  if (c.status != "pass") {
    std::printf("expected \"%s\" to earn its full points, but it %s\n", c.name.c_str(),
                c.status == "fail" ? "failed" : "earned partial points");
    return 1;
  }
  std::printf("earned as expected: \"%s\" passed (%d of the lab's %d checks passed)\n", c.name.c_str(),
              lab.count("pass"), int(lab.checks.size()));
  return 0;
}

// --fail and --short-of-full: the check was rejected, for the planted reason.
int expect_rejected(const runner::Check& c, const Args& a) {
  const bool rejected = c.status == "fail" || (a.partial_rejects && c.status == "partial");
  if (!rejected) {
    std::printf("expected \"%s\" to %s, but it %s\n", c.name.c_str(),
                a.partial_rejects ? "fall short of full points" : "fail",
                c.status == "pass" ? "passed" : c.status.c_str());
    return 1;
  }
  if (c.message.find(a.message) == std::string::npos) {
    std::printf("\"%s\" %s, but not for the planted reason: its message lacks \"%s\"\n", c.name.c_str(),
                c.status == "fail" ? "failed" : "earned partial points",
                a.message.c_str());
    return 1;
  }
  std::printf("rejected as expected: \"%s\" %s with a message containing \"%s\"\n", c.name.c_str(),
              c.status == "fail" ? "failed" : "earned partial points", a.message.c_str());
  return 0;
}

// For ctest: 0 = as expected, 1 = not as expected, 77 = everything skipped (ctest SKIP).
int expect(const Args& a) {
  if (a.binary.empty() || a.worker.empty()) usage("expect needs --binary GRADER and --worker LAB_PROCESS");
  if (int(a.full_marks) + int(!a.fail_check.empty()) + int(!a.earns_check.empty()) != 1)
    usage("expect needs one of --full-marks, --fail CHECK, --short-of-full CHECK and --earns CHECK");
  runner::become_subreaper();
  TempDir dir;
  int result = 0;
  for (const std::string& seed : seed_list(a)) {
    const LabResult lab = runner::grade({a.binary, a.worker, a.solution_worker.empty() ? a.worker : a.solution_worker,
                                         seed, a.timeout, dir.path + "/seed" + seed, a.exclude, a.only});
    if (lab.checks.empty()) {
      print_checks(lab);
      return 1;
    }
    if (lab.count("skip") == int(lab.checks.size())) {
      std::printf("every check was skipped: %s\n", runner::first_line(lab.checks[0].message).c_str());
      return 77;
    }
    if (a.full_marks) {
      const bool ok = lab.count("fail") == 0 && lab.count("partial") == 0 && lab.problem.empty();
      std::printf("seed %s: %s: %s/%d points%s\n", seed.c_str(), ok ? "full marks" : "NOT full marks",
                  runner::points_text(lab.earned()).c_str(), lab.possible(),
                  filter_note(a).c_str());
      if (!ok) {
        print_checks(lab);
        result = 1;
      }
      std::fflush(stdout);  // one line a seed as it ends, also into a pipe (a long run killed at a
                            // time limit still says which seeds it passed)
      continue;
    }
    print_checks(lab);
    const std::string& name = a.earns_check.empty() ? a.fail_check : a.earns_check;
    const runner::Check* c = find_check(lab, name);
    if (!c) {
      std::printf("the grader has no check named \"%s\"\n", name.c_str());
      return 1;
    }
    if (c->status == "skip") return 77;
    return a.earns_check.empty() ? expect_rejected(*c, a) : expect_earned(*c, lab);
  }
  return result;
}

// Prints "points<TAB>name" per check: what a lab README's table of checks must list.
int list(const Args& a) {
  if (a.binary.empty()) usage("list needs --binary");
  TempDir dir;
  const LabResult lab = runner::list_checks(a.binary, dir.path);
  for (const auto& c : lab.checks) std::printf("%d\t%s\n", c.points, c.name.c_str());
  if (!lab.problem.empty()) std::fprintf(stderr, "%s\n", lab.problem.c_str());
  return lab.checks.empty() || !lab.problem.empty() ? 1 : 0;
}

// The gradebook of grade-all. Exit code 0 when every submission was graded, 1 when some could
// not be (their rows say why), 2 for a usage error.
int gradebook(const Args& a) {
  if (a.results.empty() || a.names.empty() || a.labs.empty() || a.out == "out")
    usage("gradebook needs --results DIR --names FILE --labs 1,2 --out FILE");
  runner::GradebookRequest r{a.results, {}, {}, a.out};
  std::ifstream names(a.names, std::ios::binary);
  if (!names) usage("cannot read " + a.names);
  for (std::string name; std::getline(names, name, '\0');)
    if (!name.empty()) r.names.push_back(name);
  for (const auto& n : split(a.labs, ',')) {
    if (!all_digits(n)) usage("--labs takes lab numbers like 1,2,3");
    r.labs.push_back(std::atoi(n.c_str()));
  }
  const auto summary = runner::write_gradebook(r);
  std::printf("gradebook: %d submissions, %d graded, %d not graded: %s\n", summary.submissions,
              summary.submissions - summary.not_graded, summary.not_graded, a.out.c_str());
  return summary.not_graded ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    if (a.mode == "list") return list(a);
    if (a.mode == "grade") {
      if (a.manifest.empty()) usage("grade needs --manifest");
      return grade(a);
    }
    if (a.mode == "expect") return expect(a);
    if (a.mode == "gradebook") return gradebook(a);
  } catch (const std::runtime_error& e) {  // a results file that could not be written, say
    std::fprintf(stderr, "[course] error: %s\n", e.what());
    return 2;
  }
  usage("unknown mode '" + a.mode + "'");
}
