// what: allocates and touches 64 GiB
// expect: no points
// --- top
#include <cstring>
#include <vector>
// --- body
{ std::vector<char> hog(std::size_t(64) << 30); std::memset(hog.data(), 1, hog.size()); }
