// what: compiles 96 MiB of initialised data into its object, to fill the disk that the other submissions build on (graded here with a quota of 64 MiB on its build folder, a model of the default 4 GiB)
// expect: over its quota of 64 MiB
// env: COURSE_BUILD_QUOTA_MB=64
// --- top
// Initialised, so the object holds every byte.
static volatile char ballast[96 << 20] = {1};
// --- body
ballast[0] = 2;
