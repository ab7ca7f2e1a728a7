#include "report.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace runner {

std::string first_line(const std::string& s, std::size_t max) {
  std::string l = s.substr(0, s.find('\n'));
  if (l.size() <= max) return l;
  // Cut before a character, never inside one (a UTF-8 continuation byte is 10xxxxxx), so that
  // every file written from it stays valid UTF-8.
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(l[cut]) & 0xC0) == 0x80) --cut;
  return l.substr(0, cut) + "...";
}

std::string points_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, x == double(long(x)) ? "%.0f" : "%.1f", x);
  return buf;
}

namespace {

std::string lab_status(const LabResult& lab) {
  std::string status;
  const int n = int(lab.checks.size());
  if (!lab.problem.empty()) status = lab.problem;
  else if (lab.count("fail")) status = std::to_string(lab.count("fail")) + " of " + std::to_string(n) + " checks failed";
  else if (n && lab.count("skip") == n) status = "skipped: " + first_line(lab.checks.front().message, 120);
  else if (lab.count("partial")) status = std::to_string(lab.count("partial")) + " of " + std::to_string(n) + " checks partial";
  else status = "all checks passed";
  if (lab.count("skip") && lab.count("skip") < n) status += " (" + std::to_string(lab.count("skip")) + " skipped)";
  return status;
}

std::string score_text(const LabResult& lab) {
  if (lab.checks.empty()) return "-";
  if (lab.count("skip") == int(lab.checks.size())) return "skip/" + std::to_string(lab.possible());
  return points_text(lab.earned()) + "/" + std::to_string(lab.possible());
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
  for (unsigned char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t') continue;  // not allowed in XML 1.0
        o += char(c);
    }
  }
  return o;
}

// A TSV field: tabs and carriage returns become spaces (the text is one line already).
std::string one_field(std::string s) {
  for (char& ch : s)
    if (ch == '\t' || ch == '\r') ch = ' ';
  return s;
}

}  // namespace

void write_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  bool written = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    written = !out.fail();
  }
  // A full disk leaves a short temporary file: it must not replace the last whole one.
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write " + path + " (" + why + ")");
  }
}

namespace {

// A check's detail under its line: every line of it indented to the same column, so that a
// message of several lines (--verbose: each comparison the check made) reads as the check's.
std::string indented_detail(const std::string& detail) {
  std::string out;
  for (char ch : detail) out += ch == '\n' ? std::string("\n           ") : std::string(1, ch);
  return out;
}

}  // namespace

void print_scoreboard(const std::vector<LabResult>& labs, bool verbose, const std::string& seed) {
  double earned = 0;
  int possible = 0, skipped_points = 0;
  bool cut_short = false;
  std::printf("\n%-4s %-22s %9s  %s\n", "lab", "name", "score", "status");
  std::printf("%s\n", std::string(72, '-').c_str());
  for (const auto& lab : labs) {
    const std::string status = lab_status(lab);
    std::printf("%-4d %-22s %9s  %s\n", lab.number, lab.name.c_str(), score_text(lab).c_str(),
                first_line(status, status.size()).c_str());
    // A status of several lines (a build failure: the compiler's error with its notes) goes on
    // below the lab's line, indented.
    for (std::size_t at = status.find('\n'); at != std::string::npos;) {
      const std::size_t next = status.find('\n', at + 1);
      std::printf("       %s\n", status.substr(at + 1, next == std::string::npos ? next : next - at - 1).c_str());
      at = next;
    }
    if (!lab.problem.empty() && !lab.checks.empty() && lab.checks.front().status == "fail")
      std::printf("     %s:\n", first_line(lab.checks.front().message).c_str());
    earned += lab.earned();
    possible += lab.possible();
    for (const auto& c : lab.checks) {
      if (c.status == "skip") skipped_points += c.points;
      const bool show = c.status == "fail" || c.status == "partial" || verbose;
      if (!show) continue;
      std::string detail = verbose ? c.message : first_line(c.message);
      // Checks that could not run for the lab's reason (it did not build) say so once, above.
      if (!lab.problem.empty() && c.status == "fail" && c.message == lab.checks.front().message) detail.clear();
      if (verbose && c.status == "pass" && !c.figures.empty()) detail += (detail.empty() ? "" : "\n") + c.figures;
      cut_short = cut_short || (!verbose && !detail.empty() && detail != c.message);
      std::printf("     %-5s %s [%d pt%s]%s%s\n", c.status == "pass" ? "ok" : c.status.c_str(), c.name.c_str(),
                  c.points, c.points == 1 ? "" : "s", detail.empty() ? "" : "\n           ",
                  indented_detail(detail).c_str());
    }
  }
  std::printf("%s\n", std::string(72, '-').c_str());
  if (cut_short)
    std::printf("Messages show their first line (up to 400 characters): --verbose prints them whole, as do\n"
                "results.json and labN/grader.log in the output folder.\n");
  std::printf("Score: %s/%d", points_text(earned).c_str(), possible);
  if (skipped_points) std::printf("  (%d points skipped: their checks could not run here)", skipped_points);
  std::printf("   seed %s\n", seed.c_str());
}

// Gradescope's autograder schema: https://gradescope-autograders.readthedocs.io (results.json).
void write_results_json(const std::vector<LabResult>& labs, const std::string& path, const std::string& seed) {
  std::ostringstream out;
  double earned = 0, secs = 0;
  for (const auto& l : labs) earned += l.earned(), secs += l.seconds;
  // The output shown above the tests: the seed, and why a lab could not be graded (its build
  // error, once).
  std::string output = "seed " + seed;
  for (const auto& l : labs)
    if (!l.problem.empty()) output += "\n\nlab " + std::to_string(l.number) + " (" + l.name + "): " + l.problem;
  out << "{\n  \"score\": " << earned << ",\n  \"execution_time\": " << secs << ",\n  \"output\": \""
      << json_escape(output) << "\",\n  \"tests\": [\n";
  bool first = true;
  for (const auto& lab : labs)
    for (const auto& c : lab.checks) {
      out << (first ? "" : ",\n") << "    {\"name\": \"" << json_escape(c.name) << "\", \"number\": \""
          << lab.number << "\", \"score\": " << c.earned() << ", \"max_score\": " << c.points
          << ", \"status\": \"" << (c.status == "pass" ? "passed" : "failed") << "\", \"tags\": [\"lab"
          << lab.number << "\"" << (c.status == "skip" ? ", \"skipped\"" : "") << "], \"output\": \""
          << json_escape((c.status == "skip" ? "SKIPPED: " : "") + c.message) << "\"}";
      first = false;
    }
  out << "\n  ]\n}\n";
  write_atomically(path, out.str());
}

void write_junit(const std::vector<LabResult>& labs, const std::string& path) {
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
  for (const auto& lab : labs) {
    out << "  <testsuite name=\"lab" << lab.number << " " << xml_escape(lab.name) << "\" tests=\""
        << lab.checks.size() << "\" failures=\"" << lab.count("fail") << "\" skipped=\"" << lab.count("skip")
        << "\" time=\"" << lab.seconds << "\">\n";
    for (const auto& c : lab.checks) {
      out << "    <testcase classname=\"lab" << lab.number << "\" name=\"" << xml_escape(c.name)
          << "\" time=\"" << c.seconds << "\">";
      if (c.status == "fail" || c.status == "partial")
        out << "<failure message=\"" << xml_escape(first_line(c.message)) << "\">" << xml_escape(c.message)
            << "</failure>";
      if (c.status == "skip") out << "<skipped message=\"" << xml_escape(c.message) << "\"/>";
      out << "</testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
  write_atomically(path, out.str());
}

void write_scores_tsv(const std::vector<LabResult>& labs, const std::string& path) {
  std::ostringstream out;
  out << "lab\tname\tearned\tpossible\tstatus\tproblem\n";
  for (const auto& lab : labs) {
    // problem: why the lab could not be graded to the end (did not build, no folder, timed out,
    // crashed), without the log's path; empty when every check ran. Gradebooks show it.
    const std::string problem = lab.problem.substr(0, lab.problem.find("; log: "));
    out << lab.number << '\t' << lab.name << '\t' << points_text(lab.earned()) << '\t' << lab.possible() << '\t'
        << one_field(first_line(lab_status(lab), 200)) << '\t' << one_field(first_line(problem, 300)) << '\n';
  }
  write_atomically(path, out.str());
}

}  // namespace runner
