// The lab process's main loop: read a request, call the handler, write the reply. See worker.hpp.
#include <unistd.h>

#include <exception>
#include <new>
#include <typeinfo>
#include <utility>
#include <vector>

#include "course/counted.hpp"
#include "course/errors.hpp"
#include "worker.hpp"

namespace isolation {

namespace {
std::vector<std::pair<std::string, std::uint64_t>>& extra_counters() {
  static std::vector<std::pair<std::string, std::uint64_t>> counters;
  return counters;
}

// set_fit_after_error_check's check (constant-initialized: set from another file's static
// initializer, whatever the order of initialization).
bool (*fit_after_error)() = nullptr;

constexpr int kRequestFd = 3;
constexpr int kReplyFd = 4;

// Runs one request and fills the reply: status, message, results, counters.
Packet serve(const Registry& registry, Packet& request) {
  Status status = Status::ok;
  std::string message;
  Packet results;
  extra_counters().clear();
  course::CountedFloat::multiplications() = 0;
  course::CountedFloat::exponentials() = 0;
  try {
    const std::string name = request.get_string(256);
    const Handler* handler = registry.find(name);
    if (!handler) {
      status = Status::unknown_call;
      message = "the lab process has no call named \"" + name + "\"";
    } else {
      (*handler)(request, results);
    }
  } catch (const course::BadInput& e) {
    status = Status::bad_input;
    message = e.what();
  } catch (const course::NotImplemented& e) {
    status = Status::not_implemented;
    message = e.what();
  } catch (const std::bad_alloc&) {
    status = Status::error;
    message = "std::bad_alloc: out of memory (the lab process has a memory limit)";
  } catch (const std::exception& e) {
    status = Status::error;
    message = std::string(typeid(e).name()) + ": " + e.what();
  } catch (...) {
    status = Status::error;
    message = "an exception that is not derived from std::exception";
  }
  if (status == Status::error && !(fit_after_error != nullptr && fit_after_error())) status = Status::error_unfit;
  Packet reply;
  reply.put(status);
  reply.put_string(message);
  reply.put<std::uint64_t>(results.bytes().size());
  reply.put_bytes(results.bytes().data(), results.bytes().size());
  auto counters = extra_counters();
  counters.emplace_back("multiplications", course::CountedFloat::multiplications());
  counters.emplace_back("exponentials", course::CountedFloat::exponentials());
  reply.put<std::uint64_t>(counters.size());
  for (const auto& [name, value] : counters) {
    reply.put_string(name);
    reply.put(value);
  }
  return reply;
}
}  // namespace

void set_fit_after_error_check(bool (*check)()) { fit_after_error = check; }

void report_counter(const std::string& name, std::uint64_t value) {
  extra_counters().emplace_back(name, value);
}

}  // namespace isolation

int main() {
  isolation::Registry registry;
  registry.add("ping", [](isolation::Packet&, isolation::Packet&) {});  // "started and ready"
  isolation::register_handlers(registry);
  while (true) {
    isolation::Packet request;
    try {
      if (!isolation::read_frame(isolation::kRequestFd, request, -1)) return 0;  // grader done
    } catch (const std::exception&) {
      return 3;
    }
    const isolation::Packet reply = isolation::serve(registry, request);
    if (!isolation::write_frame(isolation::kReplyFd, reply)) return 0;
  }
}
