"""Turn the BENCH lines of lab5_dev_check and lab5_torch_ref.py (one device run) into markdown.

usage: python3 bench/lab5_summarize.py dev.log torch.log
"""
import re
import sys

LINE = re.compile(r"BENCH (.+?)\s+(bf16|fp16|bfloat16|float16) d=\s*(\d+) N=\s*(\d+) B=\s*(\d+) "
                  r"H=\s*(\d+) causal=(\d)\s+([\d.]+) ms\s+([\d.]+) TFLOP/s")
DTYPE = {"bfloat16": "bf16", "float16": "fp16"}
VERSIONS = ["mma_only", "ldmatrix", "swizzle", "pipelined", "register_p"]


def read(paths):
    rows = {}
    for path in paths:
        for line in open(path):
            m = LINE.search(line)
            if m:
                label, dt, d, n, _, _, causal, ms, tf = m.groups()
                rows[(label.strip(), DTYPE.get(dt, dt), int(d), int(n), int(causal))] = (float(tf),
                                                                                        float(ms))
    return rows


def main():
    rows = read(sys.argv[1:])
    keys = sorted({k[1:] for k in rows}, key=lambda k: (k[0] != "bf16", k[1], k[3], k[2]))
    print("| dtype | d | N | causal | " + " | ".join(VERSIONS) +
          " | torch flash | torch cuDNN | best/flash | best/cuDNN |")
    print("|---" * (8 + len(VERSIONS)) + "|")
    for dt, d, n, causal in keys:
        get = lambda label: rows.get((label, dt, d, n, causal), (None,))[0]
        get_ms = lambda label: rows.get((label, dt, d, n, causal), (None, None))[1]
        best, flash, cudnn = get("register_p"), get("torch_flash"), get("torch_cudnn")
        if best is None:
            continue
        cells = [f"{get(v):.0f} ({get_ms(v):.3g} ms)" if get(v) else "" for v in VERSIONS]
        ratio = lambda ref: f"{best / ref:.2f}" if ref else ""
        print(f"| {dt} | {d} | {n} | {causal} | " + " | ".join(cells) +
              f" | {flash or 0:.0f} | {cudnn or 0:.0f} | {ratio(flash)} | {ratio(cudnn)} |")
    alt = sorted({k for k in rows if k[0] not in VERSIONS and not k[0].startswith("torch")},
                 key=lambda k: (k[2], k[4], k[3], k[0]))
    if alt:
        print("\n| variant (register_p kernel) | dtype | d | N | causal | TFLOP/s |")
        print("|---|---|---|---|---|---|")
        for k in alt:
            print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {rows[k][0]:.0f} |")


if __name__ == "__main__":
    main()
