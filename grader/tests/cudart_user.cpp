// A program that needs the CUDA runtime, for the run-path check's planted case: it is linked, never run.
#include <cuda_runtime.h>

int main() {
  int devices = 0;
  cudaGetDeviceCount(&devices);
  return 0;
}
