// Command-line lists shared by the GPU benchmarks (bench_attention.cu, bench_backward.cu,
// bench_decoding.cu): an option's value, and comma-separated items, each checked, with an error
// that names the option.
// The parsers throw std::invalid_argument; each program's main prints "<program>: <what>" and
// exits with status 2.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

// The value of option argv[i], which is argv[i + 1]; i moves onto it. An option that ends the line
// is an error ("--out needs a value").
inline std::string option_value(int argc, char** argv, int& i) {
  if (i + 1 >= argc) throw std::invalid_argument(std::string(argv[i]) + " needs a value");
  return argv[++i];
}

// "a,b,,c" -> {"a", "b", "c"} (empty items are dropped).
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Positive whole numbers (--ns 1024,4096); where `allow_auto`, "auto" reads as 0 (--splits auto,16).
inline std::vector<int> parse_counts(const std::string& option, const std::string& list, bool allow_auto = false) {
  std::vector<int> out;
  for (const std::string& item : split_list(list)) {
    if (allow_auto && item == "auto") {
      out.push_back(0);
      continue;
    }
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || n <= 0)
      throw std::invalid_argument(option + ": '" + item + "' is not a positive whole number" +
                                  (allow_auto ? " or auto" : ""));
    out.push_back(n);
  }
  if (out.empty()) throw std::invalid_argument(option + " needs at least one value");
  return out;
}

// Byte offsets (--kv-gaps): "separate" as -1 (two allocations), or a whole number >= 0 that is a
// multiple of 16 (the kernels' loads are 16 bytes wide).
inline std::vector<long long> parse_gaps(const std::string& option, const std::string& list) {
  std::vector<long long> out;
  for (const std::string& item : split_list(list)) {
    if (item == "separate") {
      out.push_back(-1);
      continue;
    }
    size_t used = 0;
    long long n = -1;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || n < 0 || n % 16 != 0)
      throw std::invalid_argument(option + ": '" + item + "' is not 'separate' or a multiple of 16 bytes");
    out.push_back(n);
  }
  if (out.empty()) throw std::invalid_argument(option + " needs at least one value");
  return out;
}

// Items that must each be one of `allowed` (--ds 64,128); anything else is an error that says
// `rule`.
inline std::vector<int> parse_choices(const std::string& option, const std::string& list, const std::vector<int>& allowed,
                                      const std::string& rule) {
  std::vector<int> out;
  for (const std::string& item : split_list(list)) {
    const auto it = std::find_if(allowed.begin(), allowed.end(), [&](int v) { return item == std::to_string(v); });
    if (it == allowed.end()) throw std::invalid_argument(option + " " + item + ": " + rule);
    out.push_back(*it);
  }
  if (out.empty()) throw std::invalid_argument(option + " needs at least one value");
  return out;
}

}  // namespace bench
