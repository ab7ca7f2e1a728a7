// The untrusted side: the lab process. It is the student's code (or a solution, a planted bug,
// a correct variant) linked with this small server, and nothing else of the grader: no
// reference, no tolerance table, no results channel. It reads requests from fd 3 and writes
// replies to fd 4; what the student's code prints goes to a log (fds 1 and 2).
//
// Each lab's grader/labN_*/serve.cpp registers one handler per API call it serves:
//
//   void register_handlers(isolation::Registry& r) {
//     r.add("softmax_rows/fp32", [](isolation::Packet& args, isolation::Packet& results) {
//       results_put(results, course::lab1::softmax_rows<float>(get_matrix<float>(args)));
//     });
//   }
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "wire.hpp"

namespace isolation {

// How a call ended, as the reply's first byte says.
enum class Status : std::uint8_t {
  ok = 0,
  bad_input = 1,        // the lab code threw course::BadInput
  not_implemented = 2,  // the lab code threw course::NotImplemented (a skeleton)
  error = 3,            // any other exception, after which the lab process can go on
  unknown_call = 4,     // the lab process has no handler of that name
  error_unfit = 5,      // any other exception, after which the lab process cannot be trusted with
                        // another call: the grader ends it and starts a fresh one for the next
};

// After a call ended in an exception, is this lab process still fit for the next call? Unless a
// check is set here the answer is no (error_unfit): a fresh process is cheap for a CPU lab, and
// nothing its code left half done can then spoil a later check. The GPU labs' runner
// (grader/gpu/device_run.cu) sets one that asks the CUDA context: an error from a kernel (an
// illegal address, a trap) is "sticky" and fails every later CUDA call of the process, while an
// ordinary one (a launch configuration the GPU refuses, an exception of the lab's own) leaves it
// usable, and a fresh process would cost a new CUDA context for nothing.
void set_fit_after_error_check(bool (*check)());

using Handler = std::function<void(Packet& args, Packet& results)>;

class Registry {
 public:
  void add(const std::string& name, Handler h) { handlers_[name] = std::move(h); }
  const Handler* find(const std::string& name) const {
    auto it = handlers_.find(name);
    return it == handlers_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, Handler> handlers_;
};

// Defined by each lab's serve.cpp.
void register_handlers(Registry& registry);

// Counters the lab process reports after every call (reset before it): CountedFloat's
// operation counts. A lab may add its own with report_counter() during a call.
void report_counter(const std::string& name, std::uint64_t value);

}  // namespace isolation
