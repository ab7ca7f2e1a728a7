// One GPU shared by the graders of several submissions (./course grade-all --jobs N on a GPU
// machine): correctness checks may run side by side, but a speed check has the GPU to itself,
// so that a submission's speed points do not depend on what its neighbours were doing.
//
// The lock is a file named by COURSE_GPU_LOCK (the runner sets it for GPU labs only; unset, the
// lock is not taken). It is a readers-writer lock made of two flock(2) locks: the check holds the
// file shared, a speed check exclusively; a second file, "<path>.turn", is a turnstile that a
// waiting speed check holds, so that a stream of correctness checks cannot keep it waiting for
// ever (writer preference). The kernel releases both when a grader dies.
#pragma once

namespace grading {

class GpuShare {
 public:
  // Takes the GPU for one check (exclusively for a speed check). Returns the seconds it waited.
  double acquire(bool exclusive);
  // Whether there is a lock to take (COURSE_GPU_LOCK is set): acquire may wait.
  bool shared() const;
  void release();

 private:
  int main_fd_ = -1, turn_fd_ = -1;
  bool exclusive_ = false;
};

}  // namespace grading
