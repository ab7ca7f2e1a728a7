// The GPU labs' one list, include/course/gpu_labs.def, against everything that depends on it. Every
// value of lab 5's Version, lab 8's Version and lab 7's BackwardKernel makes the round trip
//   - through its name (version_name / kernel_name, choice_from_name), which must be the list's;
//   - through the grader's wire: encode_choice, gpu_wire::put_call, get_call, and choice_of,
//     the lab process's decoding (forward_handlers.hpp, serve_gpu.cpp); lab 7's grader names its
//     kernels with an enum made from the list, as grade_lab7.cpp does;
//   - through the PyTorch bridge: the name Python takes, the int Python's own code gives it
//     (python/course_attn/gpu_labs.py, run here), and the bindings' decoding
//     (python/course_attn/csrc/choices.hpp);
// and the texts that the compiler cannot hold to the list are read and compared with it: each
// enum's block in its lab header (a value the list lacks), and each lab's compiled files against
// its folder and its CMakeLists.txt. Every comparison is also shown failing, on a planted copy
// (the "planted:" cases). No GPU: nothing here launches a kernel.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "course/gpu_labs.hpp"
#include "course/lab4_cuda.hpp"  // a lab without versions
#include "csrc/choices.hpp"  // python/course_attn/csrc: the bridge's decoding
#include "gpu_wire.hpp"

namespace fs = std::filesystem;
using course::gpu_labs::choice_from_name;
using course::gpu_labs::choice_name;
using course::gpu_labs::kDefaultChoice;
using Lab5Version = course::lab5::Version;
using Lab8Version = course::lab8::Version;
using course::lab7::BackwardKernel;

namespace {

const fs::path kRoot = COURSE_SOURCE_DIR;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in.good(), "cannot read " << p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string def_text() { return read_text(kRoot / "include/course/gpu_labs.def"); }

// ---------------------------------------------------------------------------------------------
// The list as text, read the way python/course_attn/gpu_labs.py reads it: one MACRO(args) a line.

struct Entry {
  std::string macro;
  std::vector<std::string> args;  // quotes removed
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<Entry> entries(const std::string& text) {
  static const std::regex entry(R"(^(COURSE_[A-Z0-9_]+)\((.*)\)\s*$)");
  std::vector<Entry> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    const std::string t = trim(line);
    if (!std::regex_match(t, m, entry)) continue;
    Entry e{m[1], {}};
    std::istringstream args(m[2].str());
    for (std::string a; std::getline(args, a, ',');) {
      a = trim(a);
      if (a.size() >= 2 && a.front() == '"' && a.back() == '"') a = a.substr(1, a.size() - 2);
      e.args.push_back(a);
    }
    out.push_back(e);
  }
  return out;
}

// Argument `arg` of every entry of `macro`, in order.
std::vector<std::string> listed(const std::vector<Entry>& list, const std::string& macro, std::size_t arg = 0) {
  std::vector<std::string> out;
  for (const Entry& e : list)
    if (e.macro == macro && arg < e.args.size()) out.push_back(e.args[arg]);
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// ---------------------------------------------------------------------------------------------
// An enum's block in a lab header, read as text: its enumerators in order, and what `best` is.

struct EnumText {
  std::vector<std::string> names;  // the enumerators that are not aliases
  std::string best;                // `best = X`: X ("" if none)
};

EnumText enum_text(const std::string& header, const std::string& head) {
  EnumText out;
  const auto start = header.find(head);
  REQUIRE_MESSAGE(start != std::string::npos, "no '" << head << "' in the header");
  const auto end = header.find("};", start);
  std::istringstream lines(header.substr(start + head.size(), end - start - head.size()));
  static const std::regex enumerator(R"(^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=\s*([A-Za-z_][A-Za-z0-9_]*))?\s*,?)");
  for (std::string line; std::getline(lines, line);) {
    const std::string code = line.substr(0, line.find("//"));
    std::smatch m;
    if (!std::regex_search(code, m, enumerator)) continue;
    if (m[3].matched) {
      if (m[1] == "best") out.best = m[3];
    } else {
      out.names.push_back(m[1]);
    }
  }
  return out;
}

// What differs between an enum's text and the list: empty when they agree.
std::vector<std::string> enum_disagreements(const EnumText& e, const std::vector<std::string>& names,
                                            const std::string& best, const std::string& what) {
  std::vector<std::string> out;
  if (e.names != names)
    out.push_back(what + ": the header lists " + joined(e.names) + "; gpu_labs.def lists " + joined(names));
  if (e.best != best) out.push_back(what + ": best is " + e.best + " in the header, " + best + " in gpu_labs.def");
  return out;
}

// ---------------------------------------------------------------------------------------------
// The bridge: Python's table ("lab5 swizzle 2" lines), each int decoded by the bindings' code.

struct PythonChoice {
  std::string lab, name;
  long long value = 0;
};

std::vector<PythonChoice> parse_python_table(const std::string& text) {
  std::vector<PythonChoice> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    PythonChoice c;
    if (words >> c.lab >> c.name >> c.value) out.push_back(c);
  }
  return out;
}

// The name the bindings' decoding of `value` gives, as Python spells it ("" if it throws).
std::string decoded_name(const std::string& lab, long long value) {
  try {
    if (lab == "lab5") {
      course::lab5::ForwardOptions o;
      course_attn::set_version(o, value, "test");
      return choice_name(o.version);
    }
    if (lab == "lab8") {
      course::lab8::ForwardOptions o;
      course_attn::set_version(o, value, "test");
      return choice_name(o.version);
    }
    if (lab == "lab7") return course::lab7::kKernelPythonNames[int(course_attn::backward_kernel(value, "test"))];
  } catch (const std::invalid_argument&) {
  }
  return "";
}

std::vector<std::string> bridge_disagreements(const std::vector<PythonChoice>& table) {
  std::vector<std::string> out;
  std::map<std::string, std::vector<std::string>> expected = {
      {"lab5", std::vector<std::string>(std::begin(course::lab5::kVersionNames), std::end(course::lab5::kVersionNames))},
      {"lab8", std::vector<std::string>(std::begin(course::lab8::kVersionNames), std::end(course::lab8::kVersionNames))},
      {"lab7", std::vector<std::string>(std::begin(course::lab7::kKernelPythonNames),
                                        std::end(course::lab7::kKernelPythonNames))}};
  std::map<std::string, std::vector<std::string>> seen;
  for (const PythonChoice& c : table) {
    seen[c.lab].push_back(c.name);
    const std::string got = decoded_name(c.lab, c.value);
    if (got != c.name)
      out.push_back(c.lab + " '" + c.name + "': Python passes " + std::to_string(c.value) + ", which C++ decodes as " +
                    (got.empty() ? "nothing" : "'" + got + "'"));
  }
  for (auto& [lab, names] : expected) {
    auto have = seen[lab];
    std::sort(have.begin(), have.end());
    std::sort(names.begin(), names.end());
    if (have != names) out.push_back(lab + ": Python takes " + joined(have) + "; the list has " + joined(names));
  }
  return out;
}

std::string python_table() {
  const std::string cmd = "python3 '" + (kRoot / "python/course_attn/gpu_labs.py").string() + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  REQUIRE_MESSAGE(status == 0, cmd << " failed: " << out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The compiled files: each listed file exists in solutions/ and labs/ and is named in its lab's
// CMakeLists.txt; every .cu of a lab's solution folder is listed.

std::vector<std::string> source_disagreements(const std::vector<Entry>& list, const fs::path& root) {
  std::vector<std::string> out;
  std::map<std::string, std::string> folder;  // lab number -> folder
  for (const Entry& e : list)
    if (e.macro == "COURSE_GPU_LAB") folder[e.args.at(0)] = e.args.at(1);
  std::map<std::string, std::vector<std::string>> files;  // folder -> listed files
  for (const Entry& e : list) {
    if (e.macro != "COURSE_GPU_SOURCE") continue;
    if (!folder.count(e.args.at(0))) {
      out.push_back("source " + e.args.at(1) + " of lab " + e.args.at(0) + ", which is no COURSE_GPU_LAB");
      continue;
    }
    files[folder[e.args.at(0)]].push_back(e.args.at(1));
  }
  for (const auto& [number, dir] : folder) {
    const std::string cmake = read_text(root / "grader" / dir / "CMakeLists.txt");
    for (const std::string& f : files[dir]) {
      for (const char* tree : {"solutions", "labs"})
        if (!fs::exists(root / tree / dir / f)) out.push_back(std::string(tree) + "/" + dir + "/" + f + " does not exist");
      if (cmake.find(f) == std::string::npos) out.push_back("grader/" + dir + "/CMakeLists.txt does not name " + f);
    }
    for (const auto& p : fs::directory_iterator(root / "solutions" / dir)) {
      const std::string name = p.path().filename().string();
      if (p.path().extension() == ".cu" && std::count(files[dir].begin(), files[dir].end(), name) == 0)
        out.push_back("solutions/" + dir + "/" + name + " is compiled but not listed in gpu_labs.def");
    }
  }
  return out;
}

// The list with two of lab 5's versions swapped (a planted copy).
std::string swap_lines(std::string text, const std::string& a, const std::string& b) {
  const auto i = text.find(a), j = text.find(b);
  REQUIRE((i != std::string::npos && j != std::string::npos && i < j));
  return text.substr(0, i) + b + text.substr(i + a.size(), j - i - a.size()) + a + text.substr(j + b.size());
}

std::string without_line(std::string text, const std::string& line) {
  const auto at = text.find(line);
  REQUIRE(at != std::string::npos);
  return text.erase(at, line.size());
}

// One value of any of the three enums through the grader's wire and back.
template <class Choice>
Choice over_the_wire(int version, Choice fallback) {
  gpu_wire::KernelCall call;
  call.B = 2, call.H = 3, call.Nq = 5, call.Nk = 7, call.d = 128;
  call.version = version;
  isolation::Packet packet;
  gpu_wire::put_call(packet, call);
  const gpu_wire::KernelCall got = gpu_wire::get_call(packet);
  CHECK(got.d == 128);
  CHECK(packet.remaining() == 0);
  return gpu_wire::choice_of(got, fallback);
}

// Every value of an enum: its name is the list's (position i), the name finds it again, and it
// survives the wire; -1 is the default; one past the end is refused on the wire and in the bridge.
template <class Choice, std::size_t N>
void round_trip(const Choice (&all)[N], const std::vector<std::string>& names, Choice fallback) {
  REQUIRE(N == names.size());
  for (std::size_t i = 0; i < N; ++i) {
    const Choice c = all[i];
    CAPTURE(names[i]);
    CHECK(choice_name(c) == names[i]);
    CHECK(choice_from_name<Choice>(names[i]) == c);
    CHECK(course::gpu_labs::encode_choice(c) == int(i));
    CHECK(over_the_wire(course::gpu_labs::encode_choice(c), fallback) == c);
  }
  CHECK(over_the_wire(kDefaultChoice, fallback) == fallback);
  CHECK_THROWS_AS(over_the_wire(int(N), fallback), std::invalid_argument);
  CHECK_THROWS_AS(over_the_wire(-2, fallback), std::invalid_argument);
  CHECK(!choice_from_name<Choice>("no_such_version").has_value());
}

}  // namespace

TEST_CASE("lab 5's versions: names, wire and default agree with gpu_labs.def") {
  const auto list = entries(def_text());
  round_trip(course::lab5::kAllVersions, listed(list, "COURSE_LAB5_VERSION"), Lab5Version::best);
  CHECK(std::string(choice_name(Lab5Version::best)) == listed(list, "COURSE_LAB5_BEST").at(0));
}

TEST_CASE("lab 8's versions: names, wire and default agree with gpu_labs.def") {
  const auto list = entries(def_text());
  round_trip(course::lab8::kAllVersions, listed(list, "COURSE_LAB8_VERSION"), Lab8Version::best);
  CHECK(std::string(choice_name(Lab8Version::best)) == listed(list, "COURSE_LAB8_BEST").at(0));
}

TEST_CASE("lab 7's kernels: names, wire and default agree with gpu_labs.def") {
  const auto list = entries(def_text());
  round_trip(course::lab7::kAllKernels, listed(list, "COURSE_LAB7_KERNEL"), BackwardKernel::automatic);
  // grade_lab7.cpp's enum, made from the list the same way: its int is the kernel's on the wire.
  enum class GraderKernel {
#define COURSE_LAB7_KERNEL(name, python_name) name,
#include "course/gpu_labs.def"
  };
  CHECK(over_the_wire(static_cast<int>(GraderKernel::cuda_cores), BackwardKernel::automatic) ==
        BackwardKernel::cuda_cores);
  CHECK(over_the_wire(static_cast<int>(GraderKernel::tensor_cores), BackwardKernel::automatic) ==
        BackwardKernel::tensor_cores);
  CHECK(over_the_wire(static_cast<int>(GraderKernel::automatic), BackwardKernel::tensor_cores) ==
        BackwardKernel::automatic);
}

TEST_CASE("each enum's text in its lab header lists what gpu_labs.def lists") {
  const auto list = entries(def_text());
  const std::string lab5 = read_text(kRoot / "include/course/lab5_tensor_core.hpp");
  const std::string lab8 = read_text(kRoot / "include/course/lab8_hopper.hpp");
  const std::string lab7 = read_text(kRoot / "include/course/lab7_backward_gpu.hpp");
  CHECK(enum_disagreements(enum_text(lab5, "enum class Version {"), listed(list, "COURSE_LAB5_VERSION"),
                           listed(list, "COURSE_LAB5_BEST").at(0), "lab5::Version")
            .empty());
  CHECK(enum_disagreements(enum_text(lab8, "enum class Version {"), listed(list, "COURSE_LAB8_VERSION"),
                           listed(list, "COURSE_LAB8_BEST").at(0), "lab8::Version")
            .empty());
  CHECK(enum_disagreements(enum_text(lab7, "enum class BackwardKernel {"), listed(list, "COURSE_LAB7_KERNEL"), "",
                           "lab7::BackwardKernel")
            .empty());
}

TEST_CASE("the bridge: every name Python takes becomes the int that C++ decodes to the same choice") {
  const auto table = parse_python_table(python_table());
  CHECK(table.size() == std::size(course::lab5::kAllVersions) + std::size(course::lab8::kAllVersions) +
                            std::size(course::lab7::kAllKernels));
  const auto problems = bridge_disagreements(table);
  CHECK_MESSAGE(problems.empty(), joined(problems));
  // The default, and a lab without versions.
  course::lab5::ForwardOptions five;
  five.version = Lab5Version::mma_only;
  course_attn::set_version(five, kDefaultChoice, "test");
  CHECK(five.version == Lab5Version::best);
  course::lab4::ForwardOptions four;
  CHECK_NOTHROW(course_attn::set_version(four, kDefaultChoice, "test"));
  CHECK_THROWS_AS(course_attn::set_version(four, 0, "test"), std::invalid_argument);
  CHECK_THROWS_AS(course_attn::backward_kernel(1LL << 40, "test"), std::invalid_argument);
}

TEST_CASE("the compiled files of gpu_labs.def are the labs' files") {
  const auto problems = source_disagreements(entries(def_text()), kRoot);
  CHECK_MESSAGE(problems.empty(), joined(problems));
}

// --- Planted: each comparison above, given a copy that disagrees, says so. ----------------------

TEST_CASE("planted: a list with two of lab 5's versions swapped is rejected") {
  const std::string swapped =
      swap_lines(def_text(), "COURSE_LAB5_VERSION(swizzle)", "COURSE_LAB5_VERSION(pipelined)");
  const auto list = entries(swapped);
  const auto header = enum_text(read_text(kRoot / "include/course/lab5_tensor_core.hpp"), "enum class Version {");
  const auto problems = enum_disagreements(header, listed(list, "COURSE_LAB5_VERSION"),
                                           listed(list, "COURSE_LAB5_BEST").at(0), "lab5::Version");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("swizzle, pipelined") != std::string::npos);
  CHECK(problems[0].find("pipelined, swizzle") != std::string::npos);
}

TEST_CASE("planted: an enum with a value the list lacks is rejected") {
  std::string header = read_text(kRoot / "include/course/lab8_hopper.hpp");
  const std::string last = "  exp2_poly,";
  REQUIRE(header.find(last) != std::string::npos);
  header.insert(header.find(last) + last.size(), "\n  exp2_poly_faster,  // 9: a step added to the enum only");
  const auto list = entries(def_text());
  const auto problems = enum_disagreements(enum_text(header, "enum class Version {"),
                                           listed(list, "COURSE_LAB8_VERSION"), listed(list, "COURSE_LAB8_BEST").at(0),
                                           "lab8::Version");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("exp2_poly_faster") != std::string::npos);
}

TEST_CASE("planted: a list whose best is not the enum's is rejected") {
  std::string text = def_text();
  const std::string best = "COURSE_LAB8_BEST(pingpong)";
  text.replace(text.find(best), best.size(), "COURSE_LAB8_BEST(exp2_poly)");
  const auto changed = entries(text);
  const auto problems = enum_disagreements(enum_text(read_text(kRoot / "include/course/lab8_hopper.hpp"),
                                                     "enum class Version {"),
                                           listed(changed, "COURSE_LAB8_VERSION"),
                                           listed(changed, "COURSE_LAB8_BEST").at(0), "lab8::Version");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("best is pingpong in the header, exp2_poly in gpu_labs.def") != std::string::npos);
}

TEST_CASE("planted: a Python table with two of lab 7's kernels swapped is rejected") {
  auto table = parse_python_table(python_table());
  auto is = [](const char* name) { return [name](const PythonChoice& c) { return c.lab == "lab7" && c.name == name; }; };
  auto cuda = std::find_if(table.begin(), table.end(), is("cuda_cores"));
  auto tc = std::find_if(table.begin(), table.end(), is("tensor_cores"));
  REQUIRE((cuda != table.end() && tc != table.end()));
  std::swap(cuda->value, tc->value);
  const auto problems = bridge_disagreements(table);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "lab7 'cuda_cores': Python passes 2, which C++ decodes as 'tensor_cores'");
}

TEST_CASE("planted: a Python table without a version, or with one past the list, is rejected") {
  auto table = parse_python_table(python_table());
  table.erase(std::find_if(table.begin(), table.end(), [](const PythonChoice& c) { return c.name == "tma"; }));
  auto problems = bridge_disagreements(table);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("lab8: Python takes") != std::string::npos);
  const int past_the_last = int(std::size(course::lab8::kAllVersions));
  table.push_back({"lab8", "tma", past_the_last});
  problems = bridge_disagreements(table);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "lab8 'tma': Python passes " + std::to_string(past_the_last) + ", which C++ decodes as nothing");
}

TEST_CASE("planted: a list without one of lab 7's compiled files, or naming one that is not there, is rejected") {
  auto problems = source_disagreements(entries(without_line(def_text(), "COURSE_GPU_SOURCE(7, \"backward_tc.cu\", \"lab7-tc\")")), kRoot);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "solutions/lab7_backward/backward_tc.cu is compiled but not listed in gpu_labs.def");
  std::string renamed = def_text();
  const std::string line = "\"flash_tc.cu\"";
  renamed.replace(renamed.find(line), line.size(), "\"flash_tc_v2.cu\"");
  problems = source_disagreements(entries(renamed), kRoot);
  CHECK(std::count_if(problems.begin(), problems.end(), [](const std::string& p) {
          return p.find("flash_tc_v2.cu does not exist") != std::string::npos;
        }) == 2);
}
