// What the runner writes: the scoreboard on the terminal, Gradescope's results.json, JUnit XML,
// and scores.tsv (one line per lab, for gradebooks). Every text in them has already been made
// safe (valid UTF-8, no control characters, capped) when it was read from the grader.
#pragma once

#include <string>
#include <vector>

#include "results.hpp"

namespace runner {

void print_scoreboard(const std::vector<LabResult>& labs, bool verbose, const std::string& seed);

// Each file is written whole to a temporary name and renamed into place, so a reader never sees
// half a file; a write that fails (a full disk) throws std::runtime_error and leaves the last
// whole file in place.
void write_results_json(const std::vector<LabResult>& labs, const std::string& path, const std::string& seed);
void write_junit(const std::vector<LabResult>& labs, const std::string& path);
void write_scores_tsv(const std::vector<LabResult>& labs, const std::string& path);

// Writes `content` to `path + ".tmp"` and renames it into place.
void write_atomically(const std::string& path, const std::string& content);

std::string first_line(const std::string& s, std::size_t max = 400);
std::string points_text(double x);  // "20", or "17.5" for partial credit

}  // namespace runner
