"""What the PyTorch benchmark scripts (bench_torch_decoding.py, bench_torch_backward.py) share:
CUDA-event timing as bench/event_timing.hpp's (GPU time only, the calls queued behind a hold; the
same median: the middle time, or the mean of the two middle ones; the same L2 eviction), so that a
course kernel and PyTorch's are summarised alike in one report, and a one-line form of an error
for a CSV field.
"""


def median(times):
    """The median of a non-empty list of times, as event_timing.hpp's median()."""
    t = sorted(times)
    mid = len(t) // 2
    return t[mid] if len(t) % 2 else 0.5 * (t[mid - 1] + t[mid])


_cycles_per_ms = None


def hold_cycles(torch, ms):
    """GPU clock cycles of torch.cuda._sleep that last about `ms` milliseconds (measured once)."""
    global _cycles_per_ms
    if _cycles_per_ms is None:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(10 ** 7)
        b.record()
        torch.cuda.synchronize()
        _cycles_per_ms = 10 ** 7 / max(a.elapsed_time(b), 1e-3)
    return int(_cycles_per_ms * ms)


def median_ms(torch, call, reps, before_each=None):
    """Median milliseconds of `reps` calls, each between its own pair of CUDA events;
    `before_each`, where given, runs before each call outside its events (an L2Evictor).

    GPU time only, as event_timing.hpp's time_ms: the calls are queued behind a GPU sleep, and the
    batch counts only if the sleep was still running when the host had queued it all (else it is
    run again behind a sleep four times as long)."""
    hold_ms = 1.0
    while True:
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        held = torch.cuda.Event()
        torch.cuda._sleep(hold_cycles(torch, hold_ms))
        held.record()
        for a, b in ev:
            if before_each is not None:
                before_each()
            a.record()
            call()
            b.record()
        queued_in_time = not held.query()
        torch.cuda.synchronize()
        if queued_in_time:
            return median([a.elapsed_time(b) for a, b in ev])
        hold_ms *= 4
        if hold_ms > 1024:
            raise RuntimeError(f"the host did not queue {reps} calls within a second")


class L2Evictor:
    """Reads a buffer of twice the L2's size (a reduction, no writes), so that the next call
    starts with a cold L2: event_timing.hpp's L2Evictor, done with a PyTorch kernel."""

    def __init__(self, torch):
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.buffer = torch.zeros(2 * max(l2, 1 << 20) // 4, dtype=torch.int32, device="cuda")

    def __call__(self):
        self.buffer.max()


def one_line(text, limit=150):
    """`text` on one line, without commas (a CSV field), at most `limit` characters."""
    return " ".join(str(text).split()).replace(",", ";")[:limit]
