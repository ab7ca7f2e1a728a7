"""What the bridge's tests compare with, and the rule they compare by.

- math_attention: attention written out (S, P, O), differentiable, in the dtype of its inputs.
  On fp64 copies of the inputs it is the reference; in the inputs' own dtype it is the "plain
  same-dtype implementation" (PyTorch's unfused path: S, P, O each rounded to the dtype).
- sdpa: F.scaled_dot_product_attention in the inputs' dtype, the yardstick of forward outputs.
- within_band: the course's rule (FlashAttention's test rule; grader/common/tolerances.cpp):

      max |out - ref64|  <=  factor * max |yardstick - ref64|  +  floor * max(1, max |ref64|)

  i.e. a correct kernel errs at most a small multiple of what a standard implementation in the
  same precision errs on the same inputs, plus a floor for inputs where that one is exact.
- finite_difference: the derivative of a forward along a direction, with its own error measured.
- paged caches (lab 6 part 2): page_cache lays a contiguous cache out in a pool of shuffled pages,
  gather_pages reads it back through the block table (as reference::gather_pages does),
  append_rows writes new rows as append_kv must, and decode_verdicts judges a paged decoding
  sequence by sequence against the reference on the gathered rows.

Nothing here imports course_attn: these helpers judge it, and test_reference_rule.py shows that
they reject wrong results.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

U32 = 2.0 ** -24  # unit roundoff of fp32

# (factor, floor, reason) by quantity and dtype: the course's table (grader/common/tolerances.cpp).
BANDS = {
    ("output", torch.float32): (3.0, 1e-6, "2x the same-dtype yardstick (FlashAttention's rule) plus one more, for "
                                           "the scale * log2(e) folded into Q; floor ~8 fp32 ulps"),
    ("output", torch.bfloat16): (2.0, 2.0 ** -8, "2x the same-dtype yardstick; floor half a bf16 ulp at 1"),
    ("output", torch.float16): (2.0, 2.0 ** -11, "2x the same-dtype yardstick; floor half an fp16 ulp at 1"),
    ("lse", None): (2.0, 1e-5, "LSE is fp32 whatever the inputs: 2x a plain fp32 logsumexp; floor 1e-5 relative "
                               "for sums whose order differs"),
    ("gradient", torch.float32): (2.0, 1e-6, "2x the plain fp32 backward; floor ~8 fp32 ulps; plus the rounding "
                                             "walk of the scores (gradient_rounding_allowance)"),
    ("gradient", torch.bfloat16): (2.0, 2.0 ** -8, "2x the plain bf16 backward (S, P, dP, dS rounded to bf16); "
                                                   "floor half a bf16 ulp at 1"),
    ("gradient", torch.float16): (2.0, 2.0 ** -11, "2x the plain fp16 backward (S, P, dP, dS rounded to fp16); "
                                                   "floor half an fp16 ulp at 1"),
}


def band(quantity: str, dtype: torch.dtype | None):
    return BANDS[(quantity, None if quantity == "lse" else dtype)]


# ---------------------------------------------------------------------------------------------
# Seeded inputs.

def make_inputs(shapes, dtype, seed, device="cuda", scale=1.0):
    """One tensor per shape, of standard normal values (times `scale`), drawn in fp32 on the CPU
    from `seed` and rounded to `dtype`: the same values on any device, and the reference sees
    exactly the rounded values the kernel sees."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*s, generator=g) * scale).to(dtype=dtype, device=device) for s in shapes]


def qkv(b, h, nq, nk, d, dtype, seed, device="cuda", scale=1.0):
    """q [b, h, nq, d], k and v [b, h, nk, d] (make_inputs)."""
    return make_inputs([(b, h, nq, d), (b, h, nk, d), (b, h, nk, d)], dtype, seed, device, scale)


# ---------------------------------------------------------------------------------------------
# Masks and the plain implementations.

def visible(nq: int, nk: int, device=None) -> torch.Tensor:
    """[nq, nk] bool, True where query i sees key j under bottom-right causal masking: j <= i + nk - nq.

    PyTorch's is_causal=True is the top-left triangle (j <= i); the two agree only when nq == nk.
    """
    i = torch.arange(nq, device=device).unsqueeze(1)
    j = torch.arange(nk, device=device).unsqueeze(0)
    return j <= i + (nk - nq)


def has_key(nq: int, nk: int, causal: bool, device=None) -> torch.Tensor:
    """[nq] bool: the query rows that see at least one key."""
    if not causal:
        return torch.ones(nq, dtype=torch.bool, device=device)
    return visible(nq, nk, device).any(-1)


def default_scale(d: int, scale: float | None) -> float:
    return 1.0 / math.sqrt(d) if scale is None else scale


def scores(q, k, causal=False, scale=None):
    """S = scale Q K^T in the inputs' dtype, -inf where causal masking hides a key."""
    s = (q @ k.transpose(-2, -1)) * default_scale(q.shape[-1], scale)
    if causal:
        s = s.masked_fill(~visible(q.shape[-2], k.shape[-2], s.device), float("-inf"))
    return s


def probabilities(q, k, causal=False, scale=None):
    """(P, lse) in the inputs' dtype; autograd goes through them.

    A row that sees no key gets P = 0 and lse = -inf, as the course's kernels do. Its scores are
    replaced by zeros before the softmax and its P by zero after: softmax over a row of -inf is
    NaN, and a NaN would reach the gradients even through torch.where.
    """
    s = scores(q, k, causal, scale)
    rows = has_key(q.shape[-2], k.shape[-2], causal, s.device).unsqueeze(-1)  # [nq, 1]
    s_safe = torch.where(rows, s, torch.zeros_like(s))
    p = torch.softmax(s_safe, dim=-1) * rows
    lse = torch.where(rows.squeeze(-1), torch.logsumexp(s_safe, dim=-1), float("-inf"))
    return p, lse


def math_attention(q, k, v, causal=False, scale=None):
    """(o, lse) of attention written out (S, P, O), in the dtype of q, k and v."""
    p, lse = probabilities(q, k, causal, scale)
    return p @ v, lse


def sdpa(q, k, v, causal=False, scale=None):
    """F.scaled_dot_product_attention in the inputs' dtype, with the course's causal alignment.

    Causal masking is passed as an explicit bottom-right boolean mask (is_causal would be
    top-left). Rows that see no key are set to 0: PyTorch's backends differ there (NaN or 0).
    """
    nq, nk = q.shape[-2], k.shape[-2]
    mask = visible(nq, nk, q.device) if causal else None
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    rows = has_key(nq, nk, causal, q.device).unsqueeze(-1)
    return torch.where(rows, o, torch.zeros_like(o))


def plain_lse(q, k, causal=False, scale=None):
    """The LSE yardstick: a plain fp32 logsumexp (the kernels keep the LSE in fp32 whatever the
    inputs' dtype, and bf16 and fp16 inputs are exact in fp32)."""
    return probabilities(q.float(), k.float(), causal, scale)[1]


# ---------------------------------------------------------------------------------------------
# The rule.

@dataclass
class Verdict:
    ok: bool
    message: str

    def __bool__(self):
        return self.ok


def _worst(err: torch.Tensor):
    flat = int(torch.argmax(err))
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), err.shape))


def within_band(name: str, out: torch.Tensor, ref: torch.Tensor, yardstick: torch.Tensor, factor: float,
                floor: float, extra: float = 0.0, yardstick_name: str = "yardstick") -> Verdict:
    """The rule above for one tensor (compared in fp64); `extra` is an allowance added to the band.

    -inf in the reference (the LSE of a row that sees no key) must be -inf in the output too, and
    is then left out of the error; any other NaN or Inf in the output fails.
    """
    out, ref, yardstick = out.double(), ref.double(), yardstick.double()
    if out.shape != ref.shape:
        return Verdict(False, f"{name}: shape {list(out.shape)}, the reference is {list(ref.shape)}")
    empty = torch.isneginf(ref)
    if bool((empty & ~torch.isneginf(out)).any()):
        at = _worst((empty & ~torch.isneginf(out)).double())
        got = out[at].item()
        what = "finite" if math.isfinite(got) else "NaN or the other infinity"
        return Verdict(False, f"{name}: {what} where the reference is -inf, at {list(at)}: got {got}")
    bad = ~torch.isfinite(out) & ~empty
    if bool(bad.any()):
        at = _worst(bad.double())
        return Verdict(False, f"{name}: NaN/Inf where the reference has none, at {list(at)}: got {out[at].item()}")
    zero = torch.zeros((), dtype=torch.float64, device=ref.device)
    err = torch.where(empty, zero, (out - ref).abs())
    yard_err = torch.where(empty | ~torch.isfinite(yardstick), zero, (yardstick - ref).abs()).max().item()
    ref_max = torch.where(empty, zero, ref.abs()).max().item()
    limit = factor * yard_err + floor * max(1.0, ref_max) + extra
    at = _worst(err)
    worst = err[at].item()
    figures = (f"{name}: max abs error {worst:.3e} at {list(at)} (got {out[at].item():.7g}, reference "
               f"{ref[at].item():.7g}); band {limit:.3e} = {factor:g} x {yardstick_name} ({yard_err:.3e}) + "
               f"{floor:.3e} x max(1, max|ref|) ({max(1.0, ref_max):.3g})" + (f" + {extra:.3e}" if extra else ""))
    return Verdict(worst <= limit, figures)


def assert_within(verdict: Verdict, context: str = "") -> None:
    assert verdict.ok, (context + ": " if context else "") + verdict.message


def forward_verdicts(o, lse, q, k, v, causal, scale=None) -> list[Verdict]:
    """The forward comparison: o against the fp64 reference with same-dtype SDPA as the yardstick,
    lse against a plain fp32 logsumexp, and the rows that see no key exactly 0."""
    ref_o, ref_lse = math_attention(q.double(), k.double(), v.double(), causal, scale)
    factor, floor, _ = band("output", q.dtype)
    extra = output_rounding_allowance(q, k, v, scale) if q.dtype == torch.float32 else 0.0
    lse_factor, lse_floor, _ = band("lse", q.dtype)
    empty = ~has_key(q.shape[-2], k.shape[-2], causal, q.device)
    zero_rows = bool((o[..., empty, :] == 0).all())
    return [within_band("o", o, ref_o, sdpa(q, k, v, causal, scale), factor, floor, extra, "SDPA"),
            within_band("lse", lse, ref_lse, plain_lse(q, k, causal, scale), lse_factor, lse_floor, 0.0, "fp32 LSE"),
            Verdict(zero_rows, "o: rows that see no key must be exactly 0" + ("" if zero_rows else ", they are not"))]


# ---------------------------------------------------------------------------------------------
# Paged KV caches (lab 6 part 2, course/lab6_paged.hpp).
#
# The pool is [num_pages, H_kv, page_size, d]; sequence b's key j is row j % page_size of page
# block_table[b, j // page_size]. Rows that hold no key are NaN, so that a kernel reading past a
# sequence's length, or a page it does not own, shows it in its output.

def pages_for(length: int, page_size: int) -> int:
    return -(-length // page_size)


def page_cache(k, v, lengths, page_size, seed, spare_pages=2, spare_slots=1):
    """A contiguous cache k, v [B, H_kv, N, d] laid out in a pool of pages whose order is
    shuffled (from `seed`): (k_pool, v_pool, block_table int32 [B, max_pages]). Sequence b keeps
    its first lengths[b] rows; every other row of the pool, and `spare_pages` pages no sequence
    owns, hold NaN. Block-table columns past a sequence's pages name spare pages (valid indices,
    NaN rows): a kernel that reads them shows it, and no index points outside the pool."""
    B, h_kv, _, d = k.shape
    max_pages = max(pages_for(n, page_size) for n in lengths) + spare_slots
    num_pages = sum(pages_for(n, page_size) for n in lengths) + spare_pages
    order = torch.randperm(num_pages, generator=torch.Generator().manual_seed(seed)).tolist()
    owned, spares = order[:num_pages - spare_pages], order[num_pages - spare_pages:]
    table = torch.empty(B, max_pages, dtype=torch.int32)
    for b, n in enumerate(lengths):
        used = pages_for(n, page_size)
        table[b, :used] = torch.tensor(owned[:used], dtype=torch.int32)
        owned = owned[used:]
        table[b, used:] = torch.tensor([spares[i % spare_pages] for i in range(max_pages - used)], dtype=torch.int32)
    pools = []
    for cache in (k, v):
        pool = torch.full((num_pages, h_kv, page_size, d), float("nan"), dtype=cache.dtype, device=cache.device)
        for b, n in enumerate(lengths):
            scatter_rows(pool, table[b], torch.arange(n), cache[b, :, :n])
        pools.append(pool)
    return pools[0], pools[1], table.to(k.device)


def row_places(table_row, positions, page_size):
    """(pages, rows): where keys `positions` of the sequence with block-table row `table_row` live."""
    positions = positions.to(table_row.device).long()
    return table_row.long()[positions // page_size], positions % page_size


def scatter_rows(pool, table_row, positions, rows):
    """Writes rows [H_kv, len(positions), d] to keys `positions` of one sequence, in place."""
    pages, within = row_places(table_row, positions, pool.shape[2])
    pool[pages.to(pool.device), :, within.to(pool.device)] = rows.transpose(0, 1).to(pool.dtype)


def gather_pages(pool, table_row, length: int):
    """[H_kv, length, d]: the first `length` keys of one sequence, made contiguous again through its
    block-table row (reference::gather_pages, every KV head at once)."""
    pages, within = row_places(table_row, torch.arange(length), pool.shape[2])
    # Two index tensors around a slice: the indexed dimension comes first, [length, H_kv, d].
    return pool[pages.to(pool.device), :, within.to(pool.device)].transpose(0, 1)


def append_rows(pool, block_table, seqlens, new):
    """What append_kv must do, on a copy of the pool: new [B, H_kv, Nq, d] goes to positions
    seqlens[b] - Nq .. seqlens[b] - 1 of sequence b; positions below 0 are skipped."""
    out = pool.clone()
    nq = new.shape[2]
    for b, n in enumerate(seqlens.tolist()):
        positions = torch.arange(n - nq, n)
        keep = positions >= 0
        scatter_rows(out, block_table[b], positions[keep], new[b][:, keep.to(new.device)])
    return out


def expand_kv_heads(kv, h_q: int):
    """Grouped-query attention as plain attention: [..., H_kv, N, d] -> [..., H_q, N, d], query head h
    reading KV head h // (H_q / H_kv)."""
    return kv.repeat_interleave(h_q // kv.shape[-3], dim=-3)


def gathered_sequences(q, k_pool, v_pool, block_table, seqlens):
    """For each sequence b: (q[b:b+1], k, v) with k, v [1, H_q, seqlens[b], d] gathered from the
    pool and expanded to the query heads: plain attention on these is the paged call's result."""
    out = []
    for b, n in enumerate(seqlens.tolist()):
        k, v = (expand_kv_heads(gather_pages(pool, block_table[b], n), q.shape[1]).unsqueeze(0)
                for pool in (k_pool, v_pool))
        out.append((q[b:b + 1], k, v))
    return out


def decode_verdicts(o, lse, q, k_pool, v_pool, block_table, seqlens, causal, scale=None) -> list[Verdict]:
    """A paged decoding's (o, lse), sequence by sequence, against the reference on its gathered
    rows (forward_verdicts). A sequence of length 0 sees no key: o exactly 0, lse -inf."""
    verdicts = []
    for b, (qb, kb, vb) in enumerate(gathered_sequences(q, k_pool, v_pool, block_table, seqlens)):
        if kb.shape[2] == 0:
            ok = bool((o[b] == 0).all()) and bool(torch.isneginf(lse[b]).all())
            verdicts.append(Verdict(ok, f"sequence {b} (length 0): o must be 0 and lse -inf"))
            continue
        for verdict in forward_verdicts(o[b:b + 1], lse[b:b + 1], qb, kb, vb, causal, scale):
            verdicts.append(Verdict(verdict.ok, f"sequence {b} (length {kb.shape[2]}): {verdict.message}"))
    return verdicts


# ---------------------------------------------------------------------------------------------
# Allowances for fp32, from the course's analysis (grader/common/tolerances.hpp).

def output_rounding_allowance(q, k, v, scale=None) -> float:
    """fp32 outputs: 2 u32 score_max value_max. Folding scale * log2(e) into Q rounds each score
    once more, by up to u32 * scale |q_i| |k_j|; exp turns that into a relative error of P, and
    O, a P-weighted mean of V's rows, moves by up to 2 max|V| times it (with_score_rounding)."""
    q64, k64 = q.double(), k.double()
    score_max = default_scale(q.shape[-1], scale) * q64.norm(dim=-1).max().item() * k64.norm(dim=-1).max().item()
    return 2 * U32 * score_max * v.double().abs().max().item()


def gradient_rounding_allowance(q, k, v, do, causal=False, scale=None) -> dict[str, float]:
    """fp32 gradients: twice sqrt(d) u32 times each gradient's sensitivity to the rounding of the
    scores (and of dP - D), the course's with_gradient_score_rounding. A correct kernel sums each
    score in another order than the plain backward, so the two differ by a random walk of about
    sqrt(d) u32 c_ij in S_ij, c_ij = scale sum_t |q_it k_jt|; where scores nearly tie, that walk,
    not the plain backward's error, sets the size of a correct kernel's error."""
    q, k, v, do = (t.double() for t in (q, k, v, do))
    d = q.shape[-1]
    tau = default_scale(d, scale)
    p, _ = probabilities(q, k, causal, tau)
    o = p @ v
    c = tau * (q.abs() @ k.abs().transpose(-2, -1))
    dp_minus_d = (do @ v.transpose(-2, -1)) - (do * o).sum(-1, keepdim=True)
    # the walk of dP - D: two dot products that cancel, summed in different orders
    r = do.abs() @ v.abs().transpose(-2, -1) + (do.abs() * o.abs()).sum(-1, keepdim=True)
    w = p * c * dp_minus_d.abs() + p * r
    sensitivity = {
        "dv": ((p * c).transpose(-2, -1) @ do.abs()).max().item(),
        "dq": tau * (w @ k.abs()).max().item(),
        "dk": tau * (w.transpose(-2, -1) @ q.abs()).max().item(),
    }
    return {name: 2 * math.sqrt(d) * U32 * value for name, value in sensitivity.items()}


# ---------------------------------------------------------------------------------------------
# Finite differences, for the gradients of kernels that have no fp64 version.

@dataclass
class FiniteDifference:
    fd: float          # (L(x + h u) - L(x - h u)) / 2h, L evaluated with the code under test
    analytic: float    # <g, u>, g the gradient under test
    rounding: float    # how far the tested L's own rounding can move fd (measured against fp64)
    truncation: float  # |fd - <g, u>| of the fp64 reference itself, at the same rounded points
    magnitude: float   # sum |g64 * u|: the size of the derivative, without cancellation

    def verdict(self, resolution: float = 1e-2, gradient_tolerance: float = 1e-4) -> Verdict:
        """fd - <g, u> = (its rounding) + (truncation) + <g64 - g, u>, exactly; the first two are
        measured, so the test allows exactly them plus gradient_tolerance * magnitude for the
        gradient's own error. It first checks that the finite difference resolves the derivative
        at all (its measured error below `resolution` of it): otherwise h was badly chosen and
        the comparison would prove nothing."""
        noise = self.rounding + self.truncation
        gap = abs(self.fd - self.analytic)
        figures = (f"finite difference {self.fd:.9g}, <g, u> {self.analytic:.9g}, gap {gap:.3e}; its rounding "
                   f"{self.rounding:.3e} + truncation {self.truncation:.3e}; |<g, u>| up to {self.magnitude:.4g}")
        if noise > resolution * self.magnitude:
            return Verdict(False, "the finite difference is too noisy to judge the gradient (choose another h): "
                           + figures)
        return Verdict(gap <= noise + gradient_tolerance * self.magnitude,
                       figures + f"; allowed {noise + gradient_tolerance * self.magnitude:.3e}")


def finite_difference(loss, loss64, inputs, grads, grads64, directions, h: float) -> FiniteDifference:
    """loss(*inputs) -> float with the code under test; loss64 the same in fp64; grads its
    gradient (under test), grads64 the fp64 one at the same point; directions: one per input.
    The displaced points are rounded to the inputs' dtype, and the fp64 reference is evaluated
    at those same rounded points, so their rounding is part of the measured truncation."""
    plus = [x + h * u for x, u in zip(inputs, directions)]
    minus = [x - h * u for x, u in zip(inputs, directions)]
    lp, lm = loss(*plus), loss(*minus)
    lp64, lm64 = loss64(*[p.double() for p in plus]), loss64(*[m.double() for m in minus])
    fd, fd64 = (lp - lm) / (2 * h), (lp64 - lm64) / (2 * h)

    def dot(gs):
        return sum((g.double() * u.double()).sum().item() for g, u in zip(gs, directions))

    magnitude = sum((g.double() * u.double()).abs().sum().item() for g, u in zip(grads64, directions))
    return FiniteDifference(fd=fd, analytic=dot(grads), rounding=(abs(lp - lp64) + abs(lm - lm64)) / (2 * h),
                            truncation=abs(fd64 - dot(grads64)), magnitude=magnitude)
