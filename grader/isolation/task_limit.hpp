// The limit on the number of threads (tasks) a lab process may run: RLIMIT_NPROC.
//
// Why: a lab process may start threads (the CUDA runtime needs them, and the system-call filter
// cannot tell a lab's thread from the runtime's), and threads cost no CPU time while they sleep.
// Unbounded, one submission could take every PID of the machine (kernel.pid_max is 32768 on
// many), and every neighbour graded beside it (its build, its lab process, the grader's own
// forks) would fail to start for as long as the lab process lives.
//
// RLIMIT_NPROC counts the tasks of the process's real user. Inside bubblewrap's user namespace
// the kernel counts them per namespace, so the launcher's limit bounds that lab process alone;
// without namespaces every lab process of the same user shares one count, and the grader sets
// the limit at the count when the lab starts plus the allowance (four times it where the lab runs
// as the grading user, whose count grows with the grading beside it). The kernel does not apply
// the limit to root (grading as root runs the lab as "nobody", or in grade-all as a user of each
// submission's own, lab_process.hpp).
#pragma once

#include <sys/types.h>

namespace isolation {

// Threads a lab process may start beyond those of its user when it starts (COURSE_LAB_TASKS;
// 0 lifts the limit).
constexpr long kDefaultLabTasks = 256;

// Tasks (threads of every process) whose real user is `uid`, among the processes this process
// can see in /proc (in a PID namespace: the namespace's own).
long tasks_of_user(uid_t uid);

// Sets RLIMIT_NPROC (soft and hard) to the tasks of this process's real user now plus
// `allowance`; nothing when allowance <= 0. False if the limit could not be set.
bool limit_tasks_of_this_user(long allowance);

}  // namespace isolation
