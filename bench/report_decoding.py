#!/usr/bin/env python3
"""The decoding benchmark's report: a markdown table and a bandwidth picture.

Usage: report_decoding.py BASE GPU COMMIT CSV...   (run-bench --decoding calls it)
Reads the rows of bench_decoding (lab 6's kernels, lab 5's kernel without splits) and
bench_torch_decoding.py (PyTorch SDPA) and writes BASE.csv (every row; left as it is when it is
one of the CSVs read, to draw a recorded run again), BASE.md and, with matplotlib, BASE.png: GB/s
of K and V read against the KV length Nk, with the device-to-device copy of the same run drawn as
the ceiling. The picture names BASE.csv and its digest (bench/provenance.py).
  Part 1 (lab 6 part 1, a contiguous cache, Nq = 1): one table and one panel per (dtype, B*H).
  Part 2 (lab 6 part 2, paged and grouped; rows with part = 2, in CSVs that have the column):
    (a) group 1, Nq = 1, B*H = 32: lab 6 part 1 and paged against the best SDPA backend;
    (b) group 8, Nq = 1, 4, 8: the same, K and V of the KV heads counted once;
    (c) shuffled pages' time over the same kernel's on pages in order (at group 1 without such rows,
        part 1's kernel on the contiguous cache).
  Rows whose split count was forced (bench_decoding --splits 8,16) get a table of their own, each
  count against the library's; the tables above and the picture show the library's counts only.

Decoding reads K and V once and does little arithmetic, so its limit is memory bandwidth. The
copy figure counts bytes read + written; a kernel that only reads can pass it (HBM reads alone
run faster than a read-write mix), which is why some cells say more than 100%.
"""
import csv
import sys

import provenance
from torch_timing import median  # the median the benchmarks report (event_timing.hpp's too)

# Drawing order and labels; implementations not listed are drawn after these, labelled by name.
LABELS = {"lab6": "lab 6 (split-KV)", "lab6:paged": "lab 6 part 2 (paged)", "lab5": "lab 5 (one CTA per query tile, no split)",
          "torch:flash": "PyTorch flash (FA2)", "torch:efficient": "PyTorch efficient",
          "torch:cudnn": "PyTorch cuDNN", "torch:math": "PyTorch math",
          "torch:sdpa": "PyTorch SDPA (default choice)"}
# One colour per implementation in every part 1 panel, so that the one legend under the first
# panel speaks for all of them (a panel without lab 5, such as fp32's, must not hand lab 5's
# colour to the next line).
COLORS = {"lab6": "C0", "lab5": "C1", "torch:flash": "C2", "torch:sdpa": "C3", "torch:efficient": "C4",
          "lab6:paged": "C5", "torch:cudnn": "C6", "torch:math": "C7"}


def color_of(impl, impls):
    """COLORS[impl], or for an implementation it does not name one of C8, C9 by its place in
    `impls` (every part 1 implementation of the run, so that the colour is the same in every panel)."""
    others = [i for i in impls if i not in COLORS]
    return COLORS.get(impl) or f"C{8 + others.index(impl) % 2}"


# Part 2's columns, and what a CSV from before part 2 means by them.
PART2_DEFAULTS = {"part": "1", "B": "", "H_q": "", "H_kv": "", "causal": "0", "page_size": "0",
                  "layout": "contiguous", "how": ""}
# A CSV from before the l2 column timed its calls back to back, the host launching each while the
# GPU waited: a warm L2, and a short call's time included its launch.
OLDER_DEFAULTS = {**PART2_DEFAULTS, "l2": "back to back"}
# What a row measured; every other column says what was run, and rows alike in all of those are
# rounds of one configuration (BENCH_ROUNDS: one process per round, so one CSV each).
MEASURED = {"ms", "gbps", "copy_gbps", "fraction", "status", "max_abs_err", "reps"}
TORCH_BACKENDS = ["torch:flash", "torch:efficient", "torch:cudnn", "torch:math"]  # forced, one at a time
# "Best SDPA" is the fastest of these and of PyTorch's own choice (torch:sdpa, one of the same
# backends): a forced backend's time can include the cost of forcing it (see bench/README.md).
BEST_OF = TORCH_BACKENDS + ["torch:sdpa"]
PAGES = [16, 64, 256]


def load(files):
    rows = [r for f in files for r in csv.DictReader(open(f))]
    for r in rows:
        for key, value in OLDER_DEFAULTS.items():
            if r.get(key) in (None, ""):
                r[key] = value
    return rows


def combine_rounds(rows):
    """One row per configuration: the median time over the rounds whose check passed (GB/s and
    the copy fraction from it, the copy the median of the rounds'), the largest error, and
    `rounds`, `ms_min`, `ms_max`. A configuration with no passing round keeps its first row.
    Timings of one kernel differ between processes (bench/README.md), so a ratio between two
    kernels is read from medians, not from one run of each."""
    by_config = {}
    for r in rows:
        by_config.setdefault(tuple(sorted((k, v) for k, v in r.items() if k not in MEASURED)), []).append(r)
    out = []
    for same in by_config.values():
        passed = [r for r in same if r["status"] == "ok"]
        row = dict(same[0], rounds=len(passed), ms_min="", ms_max="")
        if passed:
            times = [float(r["ms"]) for r in passed]
            ms, copy = median(times), median([float(r["copy_gbps"]) for r in passed])
            gbps = float(row["kv_bytes"]) / (ms * 1e-3) / 1e9
            row.update(ms=ms, gbps=gbps, copy_gbps=copy, fraction=gbps / copy, ms_min=min(times), ms_max=max(times),
                       max_abs_err=max(float(r["max_abs_err"]) for r in passed), status="ok")
        out.append(row)
    return out


def describe(r):
    """A row's configuration in a few words, for a list."""
    words = f"part {r['part']}, {r['dtype']}, B*H = {r['BH']}, Nq = {r['Nq']}, Nk = {r['Nk']}"
    if r["part"] == "2":
        words += f", H_kv = {r['H_kv']}, {r['layout']}" + (f" pages of {r['page_size']}" if r["page_size"] != "0" else "")
    return words


def spread_markdown(rows):
    """How far the rounds of each implementation's rows lie apart: (slowest - fastest) / median."""
    several = [r for r in rows if r["status"] == "ok" and r["rounds"] > 1]
    if not several:
        return []
    def spread(r):
        return (r["ms_max"] - r["ms_min"]) / r["ms"]
    counts = sorted({r["rounds"] for r in several})
    rounds = str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    lines = ["## Spread between rounds", "",
             f"Each figure above is the median of {rounds} rounds (one process each); per implementation, the widest "
             "(slowest - fastest) / median of its rows, and its rows whose rounds lie more than 5% apart.", ""]
    for impl in ordered_impls(several):
        mine = [r for r in several if r["impl"] == impl]
        worst = max(mine, key=spread)
        wide = [r for r in mine if spread(r) > 0.05]
        lines.append(f"- {impl}: widest {100 * spread(worst):.1f}% ({describe(worst)}); {len(wide)} of {len(mine)} "
                     "rows over 5%" + (": " + "; ".join(f"{describe(r)}, {1e3 * r['ms_min']:.1f}-{1e3 * r['ms_max']:.1f} us"
                                                       for r in wide[:6]) if wide else ""))
    return lines + [""]


def part(rows, n):
    return [r for r in rows if r["part"] == str(n)]


FORCED = "split count forced"  # the `how` of a row whose split count bench_decoding --splits N forced
PLACED = "placement: V "       # how a --kv-gaps row's `how` starts: "placement: V <n> bytes after K"


def chosen(rows):
    """The rows run as the library runs them, on K and V allocated apart: not those of a sweep's
    forced split counts or placements of K and V, which the main tables and the picture leave out
    (each table takes one row per cell, and a study's row read first would stand in the library's
    place); each study has its own table."""
    return [r for r in rows if r["how"] != FORCED and PLACED not in r["how"]]


def gap_of(r):
    """A --kv-gaps row's gap in bytes; None for K and V allocated apart."""
    how = r["how"]
    return int(how[how.index(PLACED) + len(PLACED):].split()[0]) if PLACED in how else None


def ordered_impls(rows):
    present = {r["impl"] for r in rows}
    return [i for i in LABELS if i in present] + sorted(present - set(LABELS))


def groups(rows):
    """(dtype, B*H) pairs present, bf16 first, larger B*H first."""
    keys = {(r["dtype"], r["BH"]) for r in rows}
    return sorted(keys, key=lambda k: (k[0] != "bf16", k[0], -int(k[1])))


def find(rows, impl, dtype, bh, nk):
    return next((r for r in rows if r["impl"] == impl and r["dtype"] == dtype and r["BH"] == bh
                 and int(r["Nk"]) == nk), None)


def cell(r):
    if r is None:
        return ""
    if r["status"] != "ok":
        return r["status"][:40]
    splits = f" [{r['splits']}]" if r["splits"] else ""
    return f"{float(r['gbps']):.0f} ({100 * float(r['fraction']):.0f}%){splits}"


def ratio(a, b):
    if a is None or b is None or a["status"] != "ok" or b["status"] != "ok":
        return ""
    return f"{float(a['gbps']) / float(b['gbps']):.1f}x"


def part1_markdown(rows):
    lines = ["Part 1: Nq = 1, d = 128, not causal, H = 32, a contiguous cache. Each cell: GB/s of K and V read "
             "(in brackets the fraction of a device-to-device copy measured in the same process, bytes read + "
             "written; a read-only kernel can exceed it). lab6 chooses its own split count (in square brackets). "
             "lab6 / lab5: the speed-up of splitting the keys over lab 5's one CTA per query tile.", ""]
    impls = ordered_impls(rows)
    for dtype, bh in groups(rows):
        sel = [r for r in rows if r["dtype"] == dtype and r["BH"] == bh]
        present = [i for i in impls if any(r["impl"] == i for r in sel)]
        with_ratio = "lab6" in present and "lab5" in present
        header = present + (["lab6 / lab5"] if with_ratio else [])
        lines += [f"## {dtype}, B*H = {bh}", "", "| Nk | " + " | ".join(header) + " |",
                  "|---|" + "---|" * len(header)]
        for nk in sorted({int(r["Nk"]) for r in sel}):
            cells = [cell(find(sel, i, dtype, bh, nk)) for i in present]
            if with_ratio:
                cells.append(ratio(find(sel, "lab6", dtype, bh, nk), find(sel, "lab5", dtype, bh, nk)))
            lines.append(f"| {nk} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


# ---------------------------------------------------------------------------------------------
# Part 2: paged, grouped decoding. A configuration is (H_kv, Nq): group 1 has H_kv = 32, group 8
# H_kv = 4; each has Nk from 4k to 128k.

def ok(r):
    return r is not None and r["status"] == "ok"


def configs(rows):
    """(group, H_kv, Nq) present, group 1 first."""
    keys = {(int(r["H_q"]) // int(r["H_kv"]), r["H_kv"], int(r["Nq"])) for r in rows}
    return sorted(keys)


def nks(rows):
    return sorted({int(r["Nk"]) for r in rows})


def pick(rows, hkv, nq, nk, impl=None, layout=None, page=None):
    return next((r for r in rows if r["H_kv"] == hkv and int(r["Nq"]) == nq and int(r["Nk"]) == nk
                 and (impl is None or r["impl"] == impl) and (layout is None or r["layout"] == layout)
                 and (page is None or int(r["page_size"]) == page)), None)


def baseline(rows, hkv, nq, nk):
    """The same keys in order: part 1's kernel on the contiguous cache, or pages in pool order."""
    return pick(rows, hkv, nq, nk, layout="contiguous", impl="lab6") or pick(rows, hkv, nq, nk, layout="in-order")


def in_order_baseline(rows, group, hkv, nq, nk):
    """What shuffled pages are held to in (c): the same kernel on pages in pool order, where the run has
    it; at group 1 else part 1's kernel on the contiguous cache, which reads one row per KV head as
    paged_decode does. Never part 1's kernel at group 8: it does the group's rows its own, slower way,
    and its time over paged_decode's would be the two kernels' difference, not paging's cost."""
    in_order = pick(rows, hkv, nq, nk, layout="in-order")
    if in_order or group != 1:
        return in_order
    return pick(rows, hkv, nq, nk, layout="contiguous", impl="lab6")


def best_sdpa(rows, hkv, nq, nk):
    """The fastest PyTorch row (a forced backend, or PyTorch's choice) that ran and passed its check."""
    runs = [r for r in (pick(rows, hkv, nq, nk, impl=b) for b in BEST_OF) if ok(r)]
    return max(runs, key=lambda r: float(r["gbps"]), default=None)


def gbps_cell(r, fraction=True):
    """GB/s, the fraction of the copy (lab 6: and its split count in square brackets)."""
    if r is None:
        return ""
    if r["status"] != "ok":
        return r["status"][:40]
    splits = f" [{r['splits']}]" if r["splits"] and r["impl"].startswith("lab6") else ""
    return f"{float(r['gbps']):.0f}" + (f" ({100 * float(r['fraction']):.0f}%)" if fraction else "") + splits


def faster(a, b):
    """a's speed over b's (b's time / a's time): above 1, a is faster."""
    return f"{float(a['gbps']) / float(b['gbps']):.2f}x" if ok(a) and ok(b) else ""


def bandwidth_table(rows, group, hkv, nq):
    base_name = "lab6 part 1, contiguous" if nq == 1 else "lab6:paged, 256 in order"
    header = ([base_name] + [f"paged {p}" for p in PAGES] + [b.split(":")[1] for b in TORCH_BACKENDS]
              + ["sdpa (default)", "best SDPA", "part 1 / best" if nq == 1 else "in order / best", "paged 16 / best"])
    lines = ["| Nk | " + " | ".join(header) + " |", "|---|" + "---|" * len(header)]
    for nk in nks(rows):
        base, best = baseline(rows, hkv, nq, nk), best_sdpa(rows, hkv, nq, nk)
        paged = [pick(rows, hkv, nq, nk, layout="shuffled", page=p) for p in PAGES]
        cells = [gbps_cell(base)] + [gbps_cell(r) for r in paged]
        cells += [gbps_cell(pick(rows, hkv, nq, nk, impl=b), False) for b in TORCH_BACKENDS + ["torch:sdpa"]]
        cells += [f"{best['impl'].split(':')[1]} {float(best['gbps']):.0f} ({100 * float(best['fraction']):.0f}%)"
                  if best else "", faster(base, best), faster(paged[0], best)]
        lines.append(f"| {nk} | " + " | ".join(cells) + " |")
    return lines


def paged_ratios(rows, group, hkv, nq, page):
    """(Nk, shuffled pages' time / in-order time) where both ran."""
    out = []
    for nk in nks(rows):
        paged, base = pick(rows, hkv, nq, nk, layout="shuffled", page=page), in_order_baseline(rows, group, hkv, nq, nk)
        if ok(paged) and ok(base):
            out.append((nk, float(paged["ms"]) / float(base["ms"])))
    return out


def baseline_name(rows, group, hkv, nq):
    """What (c) holds a configuration's shuffled pages to, as its table and legend say it."""
    base = next((b for b in (in_order_baseline(rows, group, hkv, nq, nk) for nk in nks(rows)) if b), None)
    return "" if base is None else "pages of 256 in order" if base["layout"] == "in-order" else "part 1, contiguous"


def paged_ratio_table(rows):
    """Paged time over in-order time, per configuration and page size, against Nk."""
    cols = nks(rows)
    lines = ["| configuration | against | page | " + " | ".join(str(n) for n in cols) + " |",
             "|---|---|---|" + "---|" * len(cols)]
    missing = []
    for group, hkv, nq in configs(rows):
        against = baseline_name(rows, group, hkv, nq)
        if not against:
            missing.append(f"group {group}, Nq = {nq}")
            continue
        for p in PAGES:
            got = dict(paged_ratios(rows, group, hkv, nq, p))
            cells = [f"{got[nk]:.2f}" if nk in got else "" for nk in cols]
            lines.append(f"| group {group}, Nq = {nq} | {against} | {p} | " + " | ".join(cells) + " |")
    if missing:
        lines += ["", "Not in (c), since this run has no in-order pages for them: " + "; ".join(missing) + ". Part "
                  "1's kernel, their baseline above, does a group's rows its own way, so its time over "
                  "paged_decode's measures the two kernels, not the page order."]
    return lines


def torch_ways(rows):
    """How each PyTorch backend was given grouped heads and the causal mask, per configuration."""
    ways = sorted({(r["impl"], int(r["H_q"]) // int(r["H_kv"]), int(r["Nq"]), r["how"]) for r in rows
                   if r["impl"].startswith("torch:") and ok(r) and r["how"]})
    return [f"- {impl}, group {group}, Nq = {nq}: {how}" for impl, group, nq, how in ways]


def part2_notes(rows):
    """The largest error of each implementation, and the rows that failed (status other than ok)."""
    lines = ["Largest max |O - O_fp64| over the Nq rows of head (0, 0), per implementation (bf16 storage, fp32 "
             "arithmetic): " + ", ".join(
                 f"{impl} {max(float(r['max_abs_err']) for r in rows if r['impl'] == impl and ok(r)):.1e}"
                 for impl in ordered_impls([r for r in rows if ok(r)])) + "."]
    failed = sorted({(r["impl"], int(r["Nq"]), r["status"][:80]) for r in rows if not ok(r)})
    if failed:
        lines += ["", "Rows without a figure (implementation, Nq, status):"]
        lines += [f"- {impl}, Nq = {nq}: {status}" for impl, nq, status in failed]
    return lines


def part2_markdown(rows):
    lines = ["## Part 2: paged, grouped decoding", "",
             "bf16, d = 128. Group 1: B = 1, H_q = H_kv = 32 (part 1's B*H = 32). Group 8: B = 4, H_q = 32, "
             "H_kv = 4. Nq > 1 is causal, bottom-right (new row i sees keys j <= Nk - Nq + i). GB/s counts the K "
             "and V of the H_kv heads once: 2 * B * H_kv * Nk * d * 2 bytes over the time; in brackets the "
             "fraction of the device-to-device copy of the same run. lab6:paged reads pages of 16, 64 or 256 keys "
             "in a shuffled order; the baseline reads the same keys in order (at Nq = 1 part 1's kernel on the "
             "contiguous cache, the group as its rows; at Nq > 1 paged_decode on pages of 256 in pool order). "
             "lab 6's split count is in square brackets. PyTorch runs on a contiguous cache of the same values, "
             "each backend forced in turn, and with its own choice (sdpa); best SDPA is the fastest of those "
             "that ran and passed their check; `x / best` is best's time over x's (above 1: lab 6 is faster).",
             ""]
    for group, hkv, nq in configs(rows):
        tag = "(a)" if group == 1 else "(b)"
        lines += [f"### {tag} group {group}, Nq = {nq}" + (", causal" if nq > 1 else ""), ""]
        lines += bandwidth_table([r for r in rows if int(r["Nq"]) == nq], group, hkv, nq) + [""]
    lines += ["### (c) the paged cache: paged time / in-order time", "",
              "Pages shuffled over the same keys read in order (`against`: pages of 256 in pool order, the same "
              "kernel; or, at group 1, part 1's kernel on the contiguous cache); above 1 paging costs time.", ""]
    lines += paged_ratio_table(rows) + [""]
    ways = torch_ways(rows)
    if ways:
        lines += ["How PyTorch was given grouped heads and the mask (the first way each backend accepted):", ""]
        lines += ways + [""]
    lines += part2_notes(rows) + [""]
    return lines


def sweep_markdown(rows):
    """The forced split counts (bench_decoding --splits auto,8,16): per configuration and Nk, the
    library's own count and each forced one, GB/s and its time over the library's."""
    forced = [r for r in rows if r["how"] == FORCED]
    if not forced:
        return []
    lines = ["## Split counts forced (bench_decoding --splits)", "",
             "Each cell: GB/s of K and V, and in brackets the library's time over this count's (above 1: "
             "the forced count is faster). `auto` is the library's own count, in square brackets.", ""]
    def key(r):
        return (r["part"], r["impl"], r["dtype"], r["BH"], r["H_kv"], int(r["Nq"]), r["page_size"], r["layout"])
    for k in sorted({key(r) for r in forced}):
        part_n, impl, dtype, bh, hkv, nq, page, layout = k
        same = [r for r in rows if key(r) == k]
        counts = sorted({int(r["splits"]) for r in same if r["how"] == FORCED})
        title = f"### part {part_n}, {impl}, {dtype}, B*H = {bh}"
        title += f", H_kv = {hkv}, Nq = {nq}, pages of {page} ({layout})" if part_n == "2" else ""
        lines += [title, "", "| Nk | auto | " + " | ".join(f"S = {c}" for c in counts) + " |",
                  "|---|---|" + "---|" * len(counts)]
        for nk in sorted({int(r["Nk"]) for r in same}):
            at = [r for r in same if int(r["Nk"]) == nk and ok(r)]
            auto = next((r for r in at if r["how"] != FORCED), None)
            cells = [f"{float(auto['gbps']):.0f} [{auto['splits']}]" if auto else ""]
            for c in counts:
                r = next((r for r in at if r["how"] == FORCED and int(r["splits"]) == c), None)
                if r is None:
                    cells.append("")
                elif auto is None:
                    cells.append(f"{float(r['gbps']):.0f}")
                else:
                    cells.append(f"{float(r['gbps']):.0f} ({float(auto['ms']) / float(r['ms']):.2f}x)")
            lines.append(f"| {nk} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def placement_markdown(rows):
    """Part 1's rows timed once per placement of K and V (bench_decoding / bench_torch_decoding.py
    --kv-gaps): per implementation and Nk, the time with K and V apart and with V n bytes after K
    in one allocation, and the slowest over the fastest."""
    placed = [r for r in rows if r["part"] == "1" and PLACED in r["how"] and "forced" not in r["how"]]
    if not placed:
        return []
    gaps = sorted({gap_of(r) for r in placed})
    lines = ["## Where K and V lie (--kv-gaps)", "",
             "Part 1's time in microseconds with K and V in two allocations (`apart`, as everywhere above) and in one "
             "allocation with V n bytes after K's end; `slowest / fastest` over the placements of the row. A kernel "
             "whose time moves with the placement reads K and V in a pattern that some placements of them in memory "
             "serve worse.", ""]
    keys = sorted({(r["dtype"], r["BH"], r["impl"]) for r in placed}, key=lambda k: (k[0], -int(k[1]), k[2]))
    for dtype, bh, impl in keys:
        lines += [f"### {impl}, {dtype}, B*H = {bh}", "",
                  "| Nk | apart | " + " | ".join(f"V {g} B after K" for g in gaps) + " | slowest / fastest |",
                  "|---|---|" + "---|" * (len(gaps) + 1)]
        mine = [r for r in rows if r["part"] == "1" and (r["dtype"], r["BH"], r["impl"]) == (dtype, bh, impl)
                and "forced" not in r["how"]]
        for nk in sorted({int(r["Nk"]) for r in mine if PLACED in r["how"]}):
            at = {gap_of(r): r for r in mine if int(r["Nk"]) == nk and ok(r)}
            times = [1e3 * float(at[g]["ms"]) for g in [None] + gaps if g in at]
            cells = [f"{1e3 * float(at[g]['ms']):.1f}" if g in at else "" for g in [None] + gaps]
            lines.append(f"| {nk} | " + " | ".join(cells) + f" | {max(times) / min(times):.2f}x |" if times else "")
        lines.append("")
    return lines


def markdown(rows, gpu, commit):
    lines = [f"# Decoding: K/V bandwidth, {gpu} (commit {commit})", ""]
    mode = rows[0]["l2"]  # one mode per report (main() refuses a mix)
    lines += [{"cold": "L2 before each timed call: cold (evicted by reading twice its size, outside the call's events). ",
               "warm": "L2 before each timed call: warm (calls back to back: a cache of up to a few times the L2's size is "
                       "partly read from it). "}.get(mode, "") +
              ("Each call timed on the GPU alone: queued behind a hold kernel, so that the host's cost of launching it "
               "is not in its time." if mode in ("cold", "warm") else
               "Calls timed back to back as the host launched them (a CSV from before the l2 column): a warm L2, and a "
               "call shorter than its launch timed with the GPU waiting for it."), ""]
    library = chosen(rows)
    lines += part1_markdown(part(library, 1))
    if part(library, 2):
        lines += part2_markdown(part(library, 2))
    lines += sweep_markdown(rows)
    lines += placement_markdown(rows)
    lines += spread_markdown(library)
    return lines


# ---------------------------------------------------------------------------------------------
# The picture: part 1's panels in the first row, part 2's in the second.

def draw_copy(ax, rows):
    copies = [float(r["copy_gbps"]) for r in rows if r["copy_gbps"]]
    if copies:
        ax.axhline(max(copies), color="black", linestyle="--", linewidth=1, label="device copy (read + write)")


def style_nk_axis(ax, ylabel, title):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("KV length Nk (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)


def draw_line(ax, rows, **style):
    """GB/s against Nk through the rows' medians; where a row has several rounds, a bar from its
    slowest round's GB/s to its fastest's."""
    rows = sorted(rows, key=lambda r: int(r["Nk"]))
    x, y = [int(r["Nk"]) for r in rows], [float(r["gbps"]) for r in rows]
    below, above = [], []
    for r, g in zip(rows, y):
        several = r.get("rounds", 1) > 1
        below.append(g - float(r["kv_bytes"]) / (r["ms_max"] * 1e-3) / 1e9 if several else 0.0)
        above.append(float(r["kv_bytes"]) / (r["ms_min"] * 1e-3) / 1e9 - g if several else 0.0)
    if any(below) or any(above):
        ax.errorbar(x, y, yerr=[below, above], marker="o", capsize=2, **style)
    else:
        ax.plot(x, y, marker="o", **style)


def draw_part1_panel(ax, rows, dtype, bh):
    sel = [r for r in rows if r["dtype"] == dtype and r["BH"] == bh and r["status"] == "ok"]
    every_impl = ordered_impls([r for r in rows if r["status"] == "ok"])
    for impl in ordered_impls(sel):
        draw_line(ax, [r for r in sel if r["impl"] == impl], label=LABELS.get(impl, impl),
                  color=color_of(impl, every_impl))
    draw_copy(ax, sel)
    ax.set_ylim(bottom=0)  # from zero in every panel: a cut axis would magnify small gaps
    style_nk_axis(ax, "K and V read (GB/s)", f"part 1: {dtype}, B*H = {bh}, Nq = 1")


def draw_part2_panel(ax, rows, group, hkv, nq):
    cols = nks(rows)
    series = [("lab 6 part 1, contiguous" if nq == 1 else "lab 6 paged, 256 in order",
               lambda nk: baseline(rows, hkv, nq, nk), "-", "C0")]
    series += [(f"lab 6 paged, pages of {p} shuffled", lambda nk, p=p: pick(rows, hkv, nq, nk, layout="shuffled", page=p),
                style, "C1") for p, style in zip(PAGES, ["-", "--", ":"])]
    series += [("best PyTorch SDPA (a backend forced, or its choice)", lambda nk: best_sdpa(rows, hkv, nq, nk), "-", "C3")]
    for label, get, style, color in series:
        got = [get(nk) for nk in cols if ok(get(nk))]
        if got:
            draw_line(ax, got, linestyle=style, color=color, label=label)
    draw_copy(ax, rows)
    ax.set_ylim(bottom=0)
    tag = "(a)" if group == 1 else "(b)"
    style_nk_axis(ax, "K and V of the KV heads read (GB/s)",
                  f"part 2 {tag}: group {group}, Nq = {nq}" + (", causal" if nq > 1 else ""))
    if nq > 1:  # its baseline is not the first panel's: say so here
        legend_below(ax)


def legend_below(ax, **kwargs):
    """The legend under the panel, where it hides no line."""
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, **kwargs)


def draw_paged_ratio(ax, rows):
    """One colour per configuration, one line style per page size; the legend says each once."""
    from matplotlib.lines import Line2D
    styles = dict(zip(PAGES, ["-", "--", ":"]))
    handles = []
    for i, (group, hkv, nq) in enumerate(configs(rows)):
        against = baseline_name(rows, group, hkv, nq)
        if not against:  # no in-order pages in this run (paged_ratio_table says why)
            continue
        for p in PAGES:
            pts = paged_ratios(rows, group, hkv, nq, p)
            if pts:
                ax.plot([q[0] for q in pts], [q[1] for q in pts], marker="o", markersize=3, linestyle=styles[p],
                        color=f"C{i}")
        handles.append(Line2D([], [], color=f"C{i}", marker="o", label=f"group {group}, Nq = {nq} / {against}"))
    handles += [Line2D([], [], color="gray", linestyle=styles[p], label=f"pages of {p}") for p in PAGES]
    ax.axhline(1.0, color="black", linewidth=1)
    ax.axhspan(0.95, 1.05, color="gray", alpha=0.15, linewidth=0)
    style_nk_axis(ax, "shuffled pages' time / in-order time", "part 2 (c): the cost of shuffled pages (band: 5%)")
    legend_below(ax, handles=handles)


def plot(rows, gpu, commit, path, csv_path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report_decoding: matplotlib not found, no picture")
        return False
    p1, p2 = part(rows, 1), part(rows, 2)
    row1 = [lambda ax, k=k: draw_part1_panel(ax, p1, *k) for k in groups(p1)]
    row2 = [lambda ax, c=c: draw_part2_panel(ax, [r for r in p2 if int(r["Nq"]) == c[2]], *c) for c in configs(p2)]
    if row2:
        row2.append(lambda ax: draw_paged_ratio(ax, p2))
    grid = [r for r in (row1, row2) if r]
    ncols = max(len(r) for r in grid)
    fig, axes = plt.subplots(len(grid), ncols, figsize=(4.4 * ncols, 5.0 * len(grid)), squeeze=False)
    for panels, axrow in zip(grid, axes):
        for draw, ax in zip(panels, axrow):
            draw(ax)
        for ax in axrow[len(panels):]:
            ax.set_visible(False)
        legend_below(axrow[0])
    most = max((r["rounds"] for r in rows if r["status"] == "ok"), default=1)
    rounds = f"; the median of {most} rounds, bars from the slowest round to the fastest" if most > 1 else ""
    fig.suptitle(f"Decoding (d = 128): K/V bandwidth and the cost of paging ({gpu}, commit {commit}{rounds})",
                 fontsize=10)
    fig.tight_layout()
    provenance.savefig(fig, path, csv_path, dpi=110, bbox_inches="tight")  # the legends below too
    return True


def main(argv):
    if len(argv) < 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    base, gpu, commit, files = argv[1], argv[2], argv[3], argv[4:]
    every_row = load(files)
    if not every_row:
        print("report_decoding: no rows in " + " ".join(files), file=sys.stderr)
        return 1
    if len({r["l2"] for r in every_row}) > 1:
        print("report_decoding: these CSVs mix rows timed with a cold and with a warm L2 (or before the l2 column); "
              "report each apart", file=sys.stderr)
        return 1
    rows = combine_rounds(every_row)
    if not provenance.among(base + ".csv", files):  # a recorded run drawn again: its CSV stays
        with open(base + ".csv", "w", newline="") as out:
            w = csv.DictWriter(out, fieldnames=list(every_row[0].keys()))
            w.writeheader()
            w.writerows(every_row)
    lines = markdown(rows, gpu, commit)
    with open(base + ".md", "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(chosen(rows), gpu, commit, base + ".png", base + ".csv")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
