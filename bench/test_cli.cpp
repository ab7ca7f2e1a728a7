// The GPU benchmarks' command-line lists (bench/cli.hpp). Host code only, so tested here, where CI
// builds no GPU benchmark.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"

TEST_CASE("split_list: comma-separated items, empty ones dropped") {
  CHECK(bench::split_list("a,b,,c") == std::vector<std::string>{"a", "b", "c"});
  CHECK(bench::split_list("lab6") == std::vector<std::string>{"lab6"});
  CHECK(bench::split_list("").empty());
  CHECK(bench::split_list(",,").empty());
}

TEST_CASE("parse_counts: positive whole numbers, auto as 0 where allowed") {
  CHECK(bench::parse_counts("--ns", "1024,4096") == std::vector<int>{1024, 4096});
  CHECK(bench::parse_counts("--splits", "auto,16,33", true) == std::vector<int>{0, 16, 33});
  // Each bad item is named with its option.
  CHECK_THROWS_WITH_AS(bench::parse_counts("--ns", "10x"), "--ns: '10x' is not a positive whole number",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(bench::parse_counts("--splits", "auto,0", true),
                       "--splits: '0' is not a positive whole number or auto", std::invalid_argument);
  CHECK_THROWS_AS(bench::parse_counts("--ns", "auto"), std::invalid_argument);  // auto not allowed here
  CHECK_THROWS_AS(bench::parse_counts("--ns", "-5"), std::invalid_argument);
  CHECK_THROWS_AS(bench::parse_counts("--ns", "99999999999"), std::invalid_argument);  // past int
  CHECK_THROWS_WITH_AS(bench::parse_counts("--pages", ","), "--pages needs at least one value", std::invalid_argument);
}

TEST_CASE("parse_gaps: separate as -1, else bytes that are a multiple of 16") {
  CHECK(bench::parse_gaps("--kv-gaps", "separate,0,4096,2097152") == std::vector<long long>{-1, 0, 4096, 2097152});
  CHECK(bench::parse_gaps("--kv-gaps", "8589934592") == std::vector<long long>{8589934592LL});  // past int
  CHECK_THROWS_WITH_AS(bench::parse_gaps("--kv-gaps", "0,100"),
                       "--kv-gaps: '100' is not 'separate' or a multiple of 16 bytes", std::invalid_argument);
  CHECK_THROWS_AS(bench::parse_gaps("--kv-gaps", "-16"), std::invalid_argument);
  CHECK_THROWS_AS(bench::parse_gaps("--kv-gaps", "apart"), std::invalid_argument);
  CHECK_THROWS_AS(bench::parse_gaps("--kv-gaps", "64k"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(bench::parse_gaps("--kv-gaps", ""), "--kv-gaps needs at least one value", std::invalid_argument);
}

TEST_CASE("parse_choices: each item one of the allowed values, else the rule") {
  CHECK(bench::parse_choices("--ds", "128,64", {64, 128}, "the head dimensions are 64 and 128") ==
        std::vector<int>{128, 64});
  CHECK(bench::parse_choices("--causal", "0", {0, 1}, "0 or 1") == std::vector<int>{0});
  CHECK_THROWS_WITH_AS(bench::parse_choices("--ds", "64,96", {64, 128}, "the head dimensions are 64 and 128"),
                       "--ds 96: the head dimensions are 64 and 128", std::invalid_argument);
  CHECK_THROWS_AS(bench::parse_choices("--groups", "08", {1, 8}, "1 and 8"), std::invalid_argument);  // as written
  CHECK_THROWS_AS(bench::parse_choices("--groups", "", {1, 8}, "1 and 8"), std::invalid_argument);
}

TEST_CASE("option_value: the next argument, and an option that ends the line is an error") {
  char prog[] = "bench", out[] = "--out", file[] = "x.csv", quick[] = "--quick";
  char* argv[] = {prog, out, file, quick, out};
  int i = 1;
  CHECK(bench::option_value(5, argv, i) == "x.csv");
  CHECK(i == 2);  // on the value: the loop's ++i goes to the next option
  i = 4;
  CHECK_THROWS_WITH_AS(bench::option_value(5, argv, i), "--out needs a value", std::invalid_argument);
}
