// Makes a CPU lab's grader start its lab processes as a GPU lab's (lab_process.cpp: the GPU
// filter's rules, the GPU's device files, the CUDA runtime's folder), as grader/gpu/gpu_harness.cpp
// does for the GPU labs, so that a test can check a GPU lab's sandbox on a machine without a GPU.
extern "C" bool course_grader_of_gpu_lab() { return true; }
