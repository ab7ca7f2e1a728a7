// what: prints 200 MB to standard output and standard error
// expect: no points
// --- top
#include <cstdio>
#include <string>
// --- body
{ const std::string line(1000, 'x'); for (int i = 0; i < 100000; ++i) { std::fputs(line.c_str(), stdout); std::fputs(line.c_str(), stderr); } }
