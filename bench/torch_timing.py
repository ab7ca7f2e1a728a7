"""What the PyTorch benchmark scripts (bench_torch*.py) share: CUDA-event timing with the same
median as bench/event_timing.hpp (the middle time, or the mean of the two middle ones), so that a
course kernel and PyTorch's are summarised alike in one report, and a one-line form of an error
for a CSV field.
"""


def median(times):
    """The median of a non-empty list of times, as event_timing.hpp's median()."""
    t = sorted(times)
    mid = len(t) // 2
    return t[mid] if len(t) % 2 else 0.5 * (t[mid - 1] + t[mid])


def median_ms(torch, call, reps):
    """Median milliseconds of `reps` calls, each between its own pair of CUDA events."""
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        a.record()
        call()
        b.record()
    torch.cuda.synchronize()
    return median([a.elapsed_time(b) for a, b in ev])


def one_line(text, limit=150):
    """`text` on one line, without commas (a CSV field), at most `limit` characters."""
    return " ".join(str(text).split()).replace(",", ";")[:limit]
