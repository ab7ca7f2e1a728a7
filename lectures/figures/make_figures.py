#!/usr/bin/env python3
"""Draw the lectures' diagrams as PNGs next to this script.

    python3 lectures/figures/make_figures.py            # every figure
    python3 lectures/figures/make_figures.py backward   # only the ones whose name contains "backward"

Figures (each titled, with a legend):
  lecture06_split_merge.png    split-KV decoding: chunks, one CTA each, the merge with lab 2's combine
  lecture07_backward_dataflow.png  the FA2 backward for one K/V tile: what is loaded, what stays on
                                   chip, what goes out; and which tiles a causal backward visits

Only matplotlib and numpy. The numbers printed in the split/merge figure are computed here, from a
small seeded example, not typed in.
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch, Rectangle  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# One palette for every figure.
C_HBM = "#e8e8e8"
C_SMEM = "#cfe3f7"
C_REG = "#d7f0d2"
C_TILE = "#fff2c4"
C_ONCE = "#1f5fa8"      # loaded once
C_EVERY = "#7a7a7a"     # loaded every step
C_ATOMIC = "#c0392b"    # atomic add
C_WRITE = "#2e8b3a"     # written once
C_MASK = "#f4b183"
C_FULL = "#9dc3e6"


def box(ax, x, y, w, h, text, fc, fontsize=10, ec="#333333", lw=1.0, style="round,pad=0.004",
        ha="center", va="center", weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, fc=fc, ec=ec, lw=lw))
    if text:
        tx = x + w / 2 if ha == "center" else x + 0.01
        ax.text(tx, y + h / 2, text, ha=ha, va=va, fontsize=fontsize, weight=weight)


def arrow(ax, xy0, xy1, color, ls="-", lw=2.0, text=None, text_xy=None, fontsize=9, rad=0.0):
    ax.add_patch(FancyArrowPatch(xy0, xy1, arrowstyle="-|>", mutation_scale=14, color=color,
                                 lw=lw, ls=ls, connectionstyle=f"arc3,rad={rad}"))
    if text:
        tx, ty = text_xy if text_xy else ((xy0[0] + xy1[0]) / 2, (xy0[1] + xy1[1]) / 2)
        ax.text(tx, ty, text, fontsize=fontsize, color=color, ha="center", va="center",
                bbox=dict(fc="white", ec="none", pad=0.5))


# ----------------------------------------------------------------------------------------------
# Lecture 7: the backward pass
# ----------------------------------------------------------------------------------------------

def backward_dataflow(path):
    fig = plt.figure(figsize=(15.5, 8.6))
    fig.suptitle("Lecture 7 — the FA2 backward pass: one CTA per K/V tile j "
                 "(left), and the tiles a causal backward visits (right)", fontsize=14, weight="bold")
    ax = fig.add_axes([0.01, 0.13, 0.66, 0.80])
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")

    # HBM column
    box(ax, 0.005, 0.0, 0.25, 0.99, "", C_HBM, lw=1.2)
    ax.text(0.13, 0.955, "HBM (global memory)", ha="center", fontsize=12, weight="bold")
    hbm = {
        "Q": (0.875, "Q  [Nq, d]  (bf16)"),
        "dO": (0.785, "dO  [Nq, d]  (bf16)"),
        "LSE": (0.695, "LSE  [Nq]  (fp32, from the forward)"),
        "D": (0.595, "D = rowsum(dO ∘ O)  [Nq]  (fp32,\nthe D pass, before the main loop)"),
        "K": (0.475, "K  [Nk, d]  (bf16)"),
        "V": (0.385, "V  [Nk, d]  (bf16)"),
        "dQacc": (0.245, "dQ accumulator  [Nq, d]  (fp32,\nzeroed first; ×τ, rounded at the end)"),
        "dKV": (0.075, "dK, dV  [Nk, d]  (bf16)"),
    }
    for key, (y, label) in hbm.items():
        fc = "#fbe3e0" if key == "dQacc" else ("#e3f3e1" if key == "dKV" else "white")
        h = 0.08 if key in ("D", "dQacc") else 0.06
        box(ax, 0.02, y - h / 2, 0.22, h, label, fc, fontsize=9)

    # On-chip box
    box(ax, 0.40, 0.0, 0.59, 0.99, "", "#fafafa", lw=1.2)
    ax.text(0.695, 0.955, "on chip: the CTA that owns K/V tile j", ha="center", fontsize=12,
            weight="bold")
    box(ax, 0.415, 0.72, 0.265, 0.20, "", C_SMEM)
    ax.text(0.5475, 0.895, "shared memory", ha="center", fontsize=10, weight="bold")
    box(ax, 0.425, 0.80, 0.115, 0.06, "K_j  [Bc, d]", "white", fontsize=9)
    box(ax, 0.555, 0.80, 0.115, 0.06, "V_j  [Bc, d]", "white", fontsize=9)
    box(ax, 0.425, 0.73, 0.115, 0.055, "Q_i  [Br, d]", "white", fontsize=9)
    box(ax, 0.555, 0.73, 0.115, 0.055, "dO_i  [Br, d]", "white", fontsize=9)

    box(ax, 0.70, 0.72, 0.28, 0.20, "", C_REG)
    ax.text(0.84, 0.895, "registers, whole loop (fp32)", ha="center", fontsize=10, weight="bold")
    box(ax, 0.71, 0.80, 0.26, 0.06, "dK_j accumulator  [Bc, d]", "white", fontsize=9)
    box(ax, 0.71, 0.73, 0.26, 0.055, "dV_j accumulator  [Bc, d]", "white", fontsize=9)

    box(ax, 0.415, 0.16, 0.53, 0.53, "", C_TILE)
    ax.text(0.68, 0.665, "for each query tile i the CTA visits (the query-tile loop):",
            ha="center", fontsize=10.5, weight="bold")
    steps = [
        "S   = τ Q_i K_jᵀ        [Br, Bc]  recompute the scores",
        "P   = exp(S − LSE_i)    one exp per score; 0 where masked",
        "dV_j += Pᵀ dO_i         stays in registers",
        "dP  = dO_i V_jᵀ         [Br, Bc]",
        "dS  = P ∘ (dP − D_i)    softmax backward, no row sums",
        "dQ_i += dS K_j          fp32 atomic add into HBM",
        "dK_j += dSᵀ Q_i         stays in registers",
    ]
    for k, s in enumerate(steps):
        ax.text(0.43, 0.605 - k * 0.064, f"{k + 1}.  {s}", fontsize=9.6, family="monospace",
                va="center")
    ax.text(0.68, 0.09, "after the last i:  dK_j ← τ·dK_j; round dK_j, dV_j to bf16 once; write them",
            ha="center", fontsize=9.5, style="italic", color=C_WRITE)

    # arrows HBM -> chip
    arrow(ax, (0.24, hbm["K"][0]), (0.425, 0.83), C_ONCE, lw=2.4, rad=-0.2)
    arrow(ax, (0.24, hbm["V"][0]), (0.555, 0.805), C_ONCE, lw=2.4, rad=-0.3)
    arrow(ax, (0.24, hbm["Q"][0]), (0.425, 0.757), C_EVERY, ls="--", lw=1.6)
    arrow(ax, (0.24, hbm["dO"][0]), (0.555, 0.735), C_EVERY, ls="--", lw=1.6, rad=0.12)
    arrow(ax, (0.24, hbm["LSE"][0]), (0.415, 0.541), C_EVERY, ls="--", lw=1.6)
    arrow(ax, (0.24, hbm["D"][0]), (0.415, 0.349), C_EVERY, ls="--", lw=1.6)
    # chip -> HBM
    arrow(ax, (0.415, 0.285), (0.24, hbm["dQacc"][0]), C_ATOMIC, lw=2.4,
          text="atomic add,\nevery i", text_xy=(0.33, 0.215))
    ax.plot([0.962, 0.962], [0.72, 0.045], color=C_WRITE, lw=2.4)
    arrow(ax, (0.962, 0.045), (0.24, 0.045), C_WRITE, lw=2.4)
    ax.text(0.60, 0.045, "written once, after the loop", fontsize=9, color=C_WRITE, ha="center",
            va="center", bbox=dict(fc="white", ec="none", pad=0.5))

    handles = [
        Line2D([], [], color=C_ONCE, lw=2.4, label="loaded once per CTA (K_j, V_j)"),
        Line2D([], [], color=C_EVERY, lw=1.6, ls="--",
               label="loaded for every query tile i (Q_i, dO_i, LSE_i, D_i)"),
        Line2D([], [], color=C_ATOMIC, lw=2.4, label="added into the fp32 dQ accumulator (atomics)"),
        Line2D([], [], color=C_WRITE, lw=2.4, label="written once (dK_j, dV_j)"),
        Patch(fc=C_SMEM, ec="#333333", label="shared memory"),
        Patch(fc=C_REG, ec="#333333", label="registers for the CTA's whole life"),
        Patch(fc=C_TILE, ec="#333333", label="per-step Br×Bc tiles (S, P, dP, dS): never leave the chip"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, -0.02), ncol=3,
              fontsize=8.8, frameon=True)

    # --- right: the causal tile grid ----------------------------------------------------------
    ag = fig.add_axes([0.70, 0.20, 0.285, 0.66])
    T = 8
    jsel = 3
    for i in range(T):
        for j in range(T):
            if j > i:
                fc, hatch = "white", None
            elif j == i:
                fc, hatch = C_MASK, "///"
            else:
                fc, hatch = C_FULL, None
            ag.add_patch(Rectangle((j, T - 1 - i), 1, 1, fc=fc, ec="#333333", lw=0.8, hatch=hatch))
    ag.add_patch(Rectangle((jsel, 0), 1, T - jsel, fc="none", ec=C_ATOMIC, lw=3.0))
    ag.annotate("", xy=(jsel + 0.5, 0.15), xytext=(jsel + 0.5, T - 1 - jsel + 0.85),
                arrowprops=dict(arrowstyle="-|>", color=C_ATOMIC, lw=2.2))
    ag.annotate("first query tile of CTA j:\ni_start = max(0, ⌊(j·Bc + Nq − Nk) / Br⌋)\n(here 3)",
                xy=(jsel + 0.95, T - 1 - jsel + 0.95), xytext=(5.05, 6.75), fontsize=8.8,
                color=C_ATOMIC, ha="center", va="center",
                bbox=dict(fc="white", ec=C_ATOMIC, lw=0.8, pad=2),
                arrowprops=dict(arrowstyle="-|>", color=C_ATOMIC, lw=1.2))
    ag.set_xlim(0, T)
    ag.set_ylim(0, T)
    ag.set_aspect("equal")
    ag.set_xticks(np.arange(T) + 0.5)
    ag.set_xticklabels([str(j) for j in range(T)])
    ag.set_yticks(np.arange(T) + 0.5)
    ag.set_yticklabels([str(T - 1 - i) for i in range(T)])
    ag.set_xlabel("K/V tile j  (one CTA per column)", fontsize=10)
    ag.set_ylabel("query tile i  (the CTA's inner loop)", fontsize=10)
    ag.set_title("causal, Nq = Nk, Br = Bc:  CTA j = 3 visits\nonly the query tiles on and below "
                 "the diagonal", fontsize=10.5)
    ag.legend(handles=[Patch(fc=C_FULL, ec="#333333", label="computed, no mask"),
                       Patch(fc=C_MASK, ec="#333333", hatch="///", label="diagonal tile: masked"),
                       Patch(fc="white", ec="#333333", label="skipped: never loaded"),
                       Line2D([], [], color=C_ATOMIC, lw=2.2, label="loop of CTA j = 3")],
              loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2, fontsize=8.8)
    fig.savefig(path, dpi=130)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# Lecture 6: split-KV decoding
# ----------------------------------------------------------------------------------------------

def split_merge_example(seed=6):
    """A toy head: one query row, 4 chunks of keys of which the last is empty (past len).
    Returns per-chunk LSE and weights, and the merge error against one-shot attention."""
    rng = np.random.default_rng(seed)
    d, chunk, n_chunks, length = 8, 6, 4, 18  # chunk 3 lies past len: empty
    q = rng.standard_normal(d)
    K = rng.standard_normal((chunk * n_chunks, d)) * 1.5
    V = rng.standard_normal((chunk * n_chunks, d))
    s = K[:length] @ q / np.sqrt(d)
    p = np.exp(s - s.max())
    o_ref = (p / p.sum()) @ V[:length]
    lse_ref = s.max() + np.log(p.sum())
    lses, outs = [], []
    for c in range(n_chunks):
        lo, hi = c * chunk, min((c + 1) * chunk, length)
        if hi <= lo:
            lses.append(-np.inf)
            outs.append(np.zeros(d))
            continue
        sc = s[lo:hi]
        m = sc.max()
        w = np.exp(sc - m)
        lses.append(m + np.log(w.sum()))
        outs.append((w / w.sum()) @ V[lo:hi])
    lses = np.array(lses)
    M = lses.max()
    lse = M + np.log(np.sum(np.exp(lses - M)))
    weights = np.exp(lses - lse)
    o = sum(wt * oc for wt, oc in zip(weights, outs))
    return lses, weights, float(np.max(np.abs(o - o_ref))), float(abs(lse - lse_ref)), length, chunk


def split_merge(path):
    lses, weights, o_err, lse_err, length, chunk = split_merge_example()
    S = len(lses)
    fig = plt.figure(figsize=(15.5, 7.6))
    fig.suptitle("Lecture 6 — split-KV decoding: split the keys into chunks, one CTA per chunk, "
                 "merge with lab 2's combine", fontsize=14, weight="bold")
    ax = fig.add_axes([0.01, 0.03, 0.64, 0.86])
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")

    # the key axis
    x0, x1 = 0.04, 0.96
    w = (x1 - x0) / S
    ax.text(0.5, 0.955, "the KV cache of one (batch, head): keys 0 … capacity − 1; this sequence "
            f"has len = {length}", ha="center", fontsize=10.5)
    colors = ["#9dc3e6", "#a9d18e", "#f4b183", "#ffffff"]
    for c in range(S):
        empty = not np.isfinite(lses[c])
        ax.add_patch(Rectangle((x0 + c * w + 0.005, 0.84), w - 0.01, 0.08,
                               fc=colors[c] if not empty else "white", ec="#333333",
                               hatch="xx" if empty else None))
        lo, hi = c * chunk, (c + 1) * chunk - 1
        ax.text(x0 + c * w + w / 2, 0.88, f"chunk {c}: keys {lo}–{hi}" + ("\n(past len: empty)" if empty else ""),
                ha="center", va="center", fontsize=9.2,
                bbox=dict(fc="white", ec="none", pad=1.0) if empty else None)
        # CTA
        box(ax, x0 + c * w + 0.015, 0.56, w - 0.03, 0.17,
            f"kernel 1, CTA {c}\nLecture 3's streaming loop\nover its chunk only", "#f7f7f7", fontsize=9)
        arrow(ax, (x0 + c * w + w / 2, 0.84), (x0 + c * w + w / 2, 0.735), "#555555", lw=1.6)
        # partial result
        if empty:
            txt = "O_3 = 0\nLSE_3 = −inf"
        else:
            txt = f"O_{c}  (normalised)\nLSE_{c} = {lses[c]:.3f}"
        box(ax, x0 + c * w + 0.02, 0.38, w - 0.04, 0.11, txt, "white", fontsize=9)
        arrow(ax, (x0 + c * w + w / 2, 0.56), (x0 + c * w + w / 2, 0.49), "#555555", lw=1.6)
        arrow(ax, (x0 + c * w + w / 2, 0.38), (0.5, 0.285), C_ONCE, lw=1.8,
              rad=0.0)
    box(ax, 0.14, 0.05, 0.72, 0.23,
        "kernel 2 (merge, one CTA per output row): lab 2's combine over the S partial results\n"
        "M = max_s LSE_s        LSE = M + log Σ_s exp(LSE_s − M)\n"
        "O = Σ_s exp(LSE_s − LSE) · O_s\n"
        "an empty chunk has LSE_s = −inf: weight exp(−inf) = 0;  every chunk empty: O = 0, LSE = −inf",
        "#fff2c4", fontsize=10)
    handles = [Patch(fc="#f7f7f7", ec="#333333", label="kernel 1: one CTA per (chunk, batch·head)"),
               Patch(fc="white", ec="#333333", label="partial result (O_s, LSE_s) in the caller's fp32 workspace"),
               Patch(fc="white", ec="#333333", hatch="xx", label="empty chunk: the identity of combine"),
               Patch(fc="#fff2c4", ec="#333333", label="kernel 2: the merge"),
               Line2D([], [], color=C_ONCE, lw=1.8, label="read by the merge")]
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, -0.04), ncol=3, fontsize=8.8)

    # right: the merge weights of the toy example
    ab = fig.add_axes([0.70, 0.22, 0.28, 0.58])
    labels = [f"chunk {c}" for c in range(S)]
    bars = ab.bar(labels, weights, color=colors[:S], edgecolor="#333333")
    bars[-1].set_hatch("xx")
    for c, wt in enumerate(weights):
        ab.text(c, wt + 0.01, f"{wt:.3f}", ha="center", fontsize=9.5)
    ab.set_ylim(0, max(weights) * 1.25)
    ab.set_ylabel("merge weight  exp(LSE_s − LSE)", fontsize=10)
    ab.set_title("a worked example (one query row, d = 8,\n"
                 f"len = {length}, chunks of {chunk} keys): the weights sum to "
                 f"{weights.sum():.6f}", fontsize=10.5)
    ab.text(0.5, -0.16, f"merged vs one-shot attention:  max |ΔO| = {o_err:.1e},  |ΔLSE| = {lse_err:.1e}",
            transform=ab.transAxes, ha="center", fontsize=9.5)
    ab.legend(handles=[Patch(fc=colors[0], ec="#333333", label="weight of a chunk's O_s"),
                       Patch(fc="white", ec="#333333", hatch="xx", label="empty chunk: weight 0")],
              loc="upper right", fontsize=8.8)
    fig.savefig(path, dpi=130)
    plt.close(fig)


FIGURES = {
    "lecture06_split_merge.png": split_merge,
    "lecture07_backward_dataflow.png": backward_dataflow,
}


def main(argv):
    wanted = argv[1:]
    for name, draw in FIGURES.items():
        if wanted and not any(w in name for w in wanted):
            continue
        out = os.path.join(HERE, name)
        draw(out)
        print(f"wrote {os.path.relpath(out)}")


if __name__ == "__main__":
    main(sys.argv)
