#include "gradebook.hpp"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "report.hpp"
#include "wire.hpp"

namespace runner {

namespace {

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) out.push_back(field);
  return out;
}

// One lab's line of a submission's scores.tsv.
struct LabScore {
  std::string earned, possible, status, problem;
};

// scores.tsv: a header, then lab, name, earned, possible, status, problem. Returns false when
// the file does not exist (the submission was not graded).
bool read_scores(const std::string& path, std::map<int, LabScore>& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    const auto f = split_tabs(line);
    if (f.size() < 5) continue;
    out[std::atoi(f[0].c_str())] = {f[2], f[3], f[4], f.size() > 5 ? f[5] : ""};
  }
  return true;
}

std::string read_reason(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::string reason = isolation::safe_text(s.str(), 300, false);
  while (!reason.empty() && reason.back() == ' ') reason.pop_back();
  return reason.empty() ? "no results were written (see its grade.log)" : reason;
}

// A lab that could not run here at all (a GPU lab on a machine without one): left out of the
// possible points, like the scoreboard's skipped labs.
bool skipped_here(const LabScore& s) {
  return s.status.rfind("skipped", 0) == 0 || s.status.rfind("not built here", 0) == 0;
}

}  // namespace

std::string csv_field(const std::string& text) {
  std::string s = isolation::safe_text(text, 1000, /*keep_newlines=*/true);
  if (!s.empty() && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@')) s = "'" + s;
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

GradebookSummary write_gradebook(const GradebookRequest& r) {
  std::ostringstream csv;
  csv << "submission";
  for (int n : r.labs) csv << ",lab" << n;
  csv << ",total,possible,graded,notes\n";
  GradebookSummary summary;
  for (const auto& name : r.names) {
    ++summary.submissions;
    const std::string dir = r.results_dir + "/" + name;
    std::map<int, LabScore> scores;
    csv << csv_field(name);
    if (!read_scores(dir + "/scores.tsv", scores)) {
      ++summary.not_graded;
      for (std::size_t i = 0; i < r.labs.size(); ++i) csv << ',';
      csv << ",,,no," << csv_field("not graded: " + read_reason(dir + "/not-graded.txt")) << '\n';
      continue;
    }
    double total = 0;
    int possible = 0;
    std::string notes;
    for (int n : r.labs) {
      const auto it = scores.find(n);
      if (it == scores.end()) {
        csv << ',';
        notes += (notes.empty() ? "" : "; ") + std::string("lab") + std::to_string(n) + ": not in its results";
        continue;
      }
      const LabScore& s = it->second;
      if (skipped_here(s)) {
        csv << ",skip";
        continue;
      }
      csv << ',' << csv_field(s.earned);
      total += std::atof(s.earned.c_str());
      possible += std::atoi(s.possible.c_str());
      if (!s.problem.empty()) notes += (notes.empty() ? "" : "; ") + std::string("lab") + std::to_string(n) + ": " + s.problem;
    }
    csv << ',' << points_text(total) << ',' << possible << ",yes," << csv_field(notes) << '\n';
  }
  write_atomically(r.out, csv.str());
  return summary;
}

}  // namespace runner
