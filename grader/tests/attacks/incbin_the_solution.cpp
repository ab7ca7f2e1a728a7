// what: pastes the course's solution source into its object at compile time (.incbin, the directive split across two string literals so that no text search finds it) and sends it back in its exception messages
// expect: no points
// message: file not found
// secret: solutions/lab1_softmax/softmax.cpp
// --- top
#include <cstring>
#include <stdexcept>
#include <string>
asm(".pushsection .rodata\n"
    "course_lab1_pasted:\n"
    ".inc" "bin \"@ROOT@/solutions/lab1_softmax/softmax.cpp\"\n"
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
