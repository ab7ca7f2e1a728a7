// what: defines isolation::write_frame, the lab process's reply function, to replace it at link time
// expect: rejected by the grader's checks of lab code
// --- top
namespace isolation {
class Packet;
bool write_frame(int, const Packet&) { return true; }
}
// --- body
