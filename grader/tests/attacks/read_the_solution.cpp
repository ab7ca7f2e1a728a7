// what: reads the course's solution source at run time and sends it back in its exception messages, for a person (or a script) to copy from the results
// expect: no points
// secret: solutions/lab1_softmax/softmax.cpp
// --- top
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
// The part of the solution after `from`, up to 1500 bytes (a results message keeps about 2000).
static std::string solution_part(const std::string& from) {
  std::ifstream in("@ROOT@/solutions/lab1_softmax/softmax.cpp");
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  const std::size_t at = all.find(from);
  return at == std::string::npos ? all.substr(0, 1500) : all.substr(at, 1500);
}
// --- body
throw std::runtime_error(solution_part("softmax_rows(const Matrix<T>& x) {"));
