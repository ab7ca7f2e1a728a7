// what: pastes the course's solution source into its object 400 times at compile time (.incbin inside .rept, split as in incbin_the_solution): the vetting's search of the object then finds hundreds of kilobytes of solution lines, and must stop at the first, not lose it (a search piped into head dies of SIGPIPE under pipefail)
// expect: no points
// message: file not found
// secret: solutions/lab1_softmax/softmax.cpp
// --- top
#include <cstring>
#include <stdexcept>
#include <string>
asm(".pushsection .rodata\n"
    "course_lab1_pasted:\n"
    ".rept 400\n"
    ".inc" "bin \"@ROOT@/solutions/lab1_softmax/softmax.cpp\"\n"
    ".endr\n"
    ".byte 0\n"
    ".popsection\n");
// The label is local to this object (no symbol the vetting of definitions would see).
static std::string pasted_part(const char* from) {
  const char* pasted;
  asm("lea course_lab1_pasted(%%rip), %0" : "=r"(pasted));
  const char* at = std::strstr(pasted, from);
  return std::string(at ? at : pasted).substr(0, 1500);
}
// --- body
throw std::runtime_error(pasted_part("softmax_rows(const Matrix<T>& x) {"));
