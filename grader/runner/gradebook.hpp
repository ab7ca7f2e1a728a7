// The gradebook of a class: one CSV row per submission, assembled from the scores.tsv that
// grading wrote for each (./course grade-all, on one machine or as a Slurm job array).
#pragma once

#include <string>
#include <vector>

namespace runner {

struct GradebookRequest {
  std::string results_dir;          // DIR/<submission>/scores.tsv, written by `course_runner grade`
  std::vector<std::string> names;   // the submissions, in the order of the rows
  std::vector<int> labs;            // the lab columns, in order
  std::string out;                  // gradebook.csv
};

struct GradebookSummary {
  int submissions = 0;
  int not_graded = 0;  // rows without results (the reason is in their notes)
};

// Writes the gradebook. Every submission gets a row whatever happened to it: a lab that could
// not be graded to the end says why in the notes column, and a submission without results is
// marked "no" in the graded column with the reason grading left in DIR/<submission>/not-graded.txt.
GradebookSummary write_gradebook(const GradebookRequest& request);

// One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break; made valid
// UTF-8; and a leading = + - @ (a formula to a spreadsheet) is prefixed with a quote mark.
std::string csv_field(const std::string& text);

}  // namespace runner
