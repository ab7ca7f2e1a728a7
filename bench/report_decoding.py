#!/usr/bin/env python3
"""The decoding benchmark's report: a markdown table and a bandwidth picture.

Usage: report_decoding.py BASE GPU COMMIT CSV...   (run-bench --decoding calls it)
Reads the rows of bench_decoding (lab 6's split-KV kernel, lab 5's kernel without splits) and
bench_torch_decoding.py (PyTorch SDPA) and writes BASE.csv (every row), BASE.md and, with
matplotlib, BASE.png: GB/s of K and V read against the KV length Nk, one panel per (dtype, B*H),
with the device-to-device copy of the same run drawn as the ceiling.

Decoding reads K and V once and does little arithmetic, so its limit is memory bandwidth. The
copy figure counts bytes read + written; a kernel that only reads can pass it (HBM reads alone
run faster than a read-write mix), which is why some cells say more than 100%.
"""
import csv
import sys

# Drawing order and labels; implementations not listed are drawn after these, labelled by name.
LABELS = {"lab6": "lab 6 (split-KV)", "lab5": "lab 5 (one CTA per query tile, no split)",
          "torch:flash": "PyTorch flash (FA2)", "torch:sdpa": "PyTorch SDPA (default choice)"}


def load(files):
    return [r for f in files for r in csv.DictReader(open(f))]


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


def markdown(rows, gpu, commit):
    lines = [f"# Decoding: K/V bandwidth, {gpu} (commit {commit})", "",
             "Nq = 1, d = 128, not causal, H = 32. Each cell: GB/s of K and V read (in brackets the "
             "fraction of a device-to-device copy measured in the same process, bytes read + written; a "
             "read-only kernel can exceed it). lab6 chooses its own split count (in square brackets). "
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


def plot(rows, gpu, commit, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report_decoding: matplotlib not found, no picture")
        return False
    panels = groups(rows)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), squeeze=False, sharey=True)
    for ax, (dtype, bh) in zip(axes[0], panels):
        sel = [r for r in rows if r["dtype"] == dtype and r["BH"] == bh and r["status"] == "ok"]
        for impl in ordered_impls(sel):
            pts = sorted((int(r["Nk"]), float(r["gbps"])) for r in sel if r["impl"] == impl)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=LABELS.get(impl, impl))
        copies = [float(r["copy_gbps"]) for r in sel if r["copy_gbps"]]
        if copies:
            ax.axhline(max(copies), color="black", linestyle="--", linewidth=1,
                       label="device copy (read + write)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("KV length Nk (tokens)")
        ax.set_ylabel("K and V read (GB/s)")
        ax.set_title(f"{dtype}, B*H = {bh}")
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Decoding (Nq = 1, d = 128): K/V bandwidth ({gpu}, commit {commit})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv):
    if len(argv) < 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    base, gpu, commit, files = argv[1], argv[2], argv[3], argv[4:]
    rows = load(files)
    if not rows:
        print("report_decoding: no rows in " + " ".join(files), file=sys.stderr)
        return 1
    with open(base + ".csv", "w", newline="") as out:
        w = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    lines = markdown(rows, gpu, commit)
    with open(base + ".md", "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(rows, gpu, commit, base + ".png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
