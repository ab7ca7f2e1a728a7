"""course_attn.decode, lab 6 part 2: decoding from a paged KV cache with grouped-query attention.

Every check gathers each sequence's keys back out of the pool through the block table
(attn_reference.gather_pages, as the grader's reference::gather_pages), expands the KV heads to
the query heads, and compares with the fp64 reference by the course's rule, F.scaled_dot_product_
attention in the same dtype as the yardstick (attn_reference.decode_verdicts). The pool's pages
are in shuffled order, and every row that is not a key is NaN: a kernel that reads past a
length, or a page it does not own, shows it in its output.

The first tests run on the CPU: they check the paged reference itself (the gathering, the
append, and that the comparison rejects a wrong block table). The rest need a GPU.
"""
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import course_attn  # noqa: E402
from attn_reference import (append_rows, decode_verdicts, expand_kv_heads, forward_verdicts,  # noqa: E402
                            gather_pages, gathered_sequences, make_inputs, math_attention, page_cache, pages_for, scatter_rows)
from test_forward import seed_of  # noqa: E402

BF16, F16, I32 = torch.bfloat16, torch.float16, torch.int32


def paged_inputs(h_q, h_kv, nq, d, lengths, page_size, dtype, seed, device="cuda"):
    """q [B, h_q, nq, d] and a paged cache holding each sequence's first lengths[b] keys:
    (q, k_pool, v_pool, block_table, seqlens), the index tensors int32 on `device`."""
    B, n = len(lengths), max(max(lengths), 1)
    q, k, v = make_inputs([(B, h_q, nq, d), (B, h_kv, n, d), (B, h_kv, n, d)], dtype, seed, device)
    k_pool, v_pool, table = page_cache(k, v, lengths, page_size, seed)
    return q, k_pool, v_pool, table, torch.tensor(lengths, dtype=I32, device=device)


def failures(verdicts):
    return [v.message for v in verdicts if not v.ok]


def assert_all(verdicts, context):
    bad = failures(verdicts)
    assert not bad, context + ":\n  " + "\n  ".join(bad)


def bits(t):
    """A tensor's bit patterns: equal bits means equal values, NaN included."""
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32)


def rolled_table(table, seqlens, page_size):
    """The planted bug: each sequence's pages rolled by one (its first key read from its last
    page, ...); every index still a page of the pool, so nothing reads outside it."""
    bad = table.clone()
    for b, n in enumerate(seqlens.tolist()):
        used = pages_for(n, page_size)
        bad[b, :used] = table[b, :used].roll(1)
    return bad


def padded_attention(q, k, v, lengths, causal):
    """The paged call's result computed another way, for the CPU tests: fp64 attention on the
    contiguous cache [B, H_kv, N, d] with a mask for each sequence's length (and causal masking,
    bottom-right with that length), no pages and no gathering; rows that see no key are 0."""
    nq, n = q.shape[2], k.shape[2]
    i = torch.arange(nq).view(1, nq, 1)
    j = torch.arange(n).view(1, 1, n)
    length = torch.tensor(lengths).view(-1, 1, 1)
    mask = (j < length) & (~torch.tensor(causal) | (j <= length - nq + i))  # [B, nq, n]
    mask = mask.unsqueeze(1)  # every head
    s = (q.double() @ expand_kv_heads(k.double(), q.shape[1]).transpose(-2, -1)) / q.shape[-1] ** 0.5
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s.masked_fill(~mask.any(-1, keepdim=True), 0.0), dim=-1) * mask
    lse = torch.logsumexp(s, dim=-1)
    return p @ expand_kv_heads(v.double(), q.shape[1]), lse


# ---------------------------------------------------------------------------------------------
# The reference itself (CPU).

@pytest.mark.parametrize("page_size", [16, 64])
def test_pages_round_trip(page_size):
    lengths = [0, 1, page_size, 2 * page_size + 5]  # empty, one key, a full page, ending mid-page
    k, v = make_inputs([(4, 2, max(lengths), 8)] * 2, torch.float32, seed=1, device="cpu")
    k_pool, v_pool, table = page_cache(k, v, lengths, page_size, seed=1)
    for b, n in enumerate(lengths):
        assert torch.equal(gather_pages(k_pool, table[b], n), k[b, :, :n])
        assert torch.equal(gather_pages(v_pool, table[b], n), v[b, :, :n])
    # Everything else is NaN: the rows past each length and the spare pages.
    assert int((~torch.isnan(k_pool[..., 0])).sum()) == 2 * sum(lengths)
    # The pages are shuffled: the table is not the pool's order.
    assert table[:, 0].tolist() != sorted(table[:, 0].tolist())


def test_append_rows_goes_to_the_end_of_each_sequence():
    nq, page_size = 4, 16
    lengths = [2, 16, 21]  # shorter than Nq (its first two new rows have no place), a page, mid-page
    old = [max(n - nq, 0) for n in lengths]
    k, new = make_inputs([(3, 2, max(lengths), 8), (3, 2, nq, 8)], torch.float32, seed=2, device="cpu")
    pool, _, table = page_cache(k, k, old, page_size, seed=2, spare_slots=2)
    after = append_rows(pool, table, torch.tensor(lengths), new)
    for b, n in enumerate(lengths):
        expected = torch.cat([k[b, :, :old[b]], new[b, :, nq - (n - old[b]):]], dim=1)
        assert torch.equal(gather_pages(after, table[b], n), expected)
    assert torch.equal(gather_pages(pool, table[0], 0), gather_pages(after, table[0], 0))  # nothing else moved
    assert int((~torch.isnan(after[..., 0])).sum()) == 2 * sum(lengths)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("h_q, h_kv", [(2, 2), (8, 2), (8, 1)], ids=["group1", "group4", "mqa"])
def test_paged_reference_agrees_with_masked_attention(h_q, h_kv, causal):
    # A correct result, made without pages (padded_attention), passes the paged comparison.
    nq, page_size = 4, 16
    lengths = [0, 2, 16, 37]  # 2 < Nq: under causal masking its first rows see no key
    q, k, v = make_inputs([(4, h_q, nq, 64), (4, h_kv, 37, 64), (4, h_kv, 37, 64)], BF16, seed=3, device="cpu")
    k_pool, v_pool, table = page_cache(k, v, lengths, page_size, seed=3)
    o, lse = padded_attention(q, k, v, lengths, causal)
    assert_all(decode_verdicts(o.to(BF16), lse.float(), q, k_pool, v_pool, table, torch.tensor(lengths), causal),
               f"h_q={h_q} h_kv={h_kv} causal={causal}")


def test_the_comparison_rejects_a_rolled_block_table():
    # The planted bug of test_wrong_block_table_is_caught, on the CPU: the "kernel" is the
    # reference on the rolled table. Causal masking with Nq > 1 makes the order of the keys
    # matter; lengths of whole pages keep NaN out, so only the order can give it away.
    nq, page_size = 4, 16
    lengths = [32, 48]
    q, k, v = make_inputs([(2, 4, nq, 64), (2, 2, 48, 64), (2, 2, 48, 64)], BF16, seed=4, device="cpu")
    k_pool, v_pool, table = page_cache(k, v, lengths, page_size, seed=4)
    seqlens = torch.tensor(lengths)
    for causal, caught in ((True, True), (False, False)):
        wrong = rolled_table(table, seqlens, page_size)
        results = [math_attention(qb.double(), kb.double(), vb.double(), causal)
                   for qb, kb, vb in gathered_sequences(q, k_pool, v_pool, wrong, seqlens)]
        o = torch.cat([o for o, _ in results]).to(BF16)
        lse = torch.cat([lse for _, lse in results]).float()
        bad = failures(decode_verdicts(o, lse, q, k_pool, v_pool, table, seqlens, causal))
        # Without causal masking attention does not see the order of its keys: a rolled table
        # of full pages gives the same result. Why test_decode_matches_reference runs causal
        # too, and with lengths that end mid-page (whose NaN rows a wrong page brings in).
        assert bool(bad) == caught, f"causal={causal}: {bad}"


# ---------------------------------------------------------------------------------------------
# The kernels (GPU).

PAGE_SIZES = [16, 64, 256]
# (H_q, H_kv): plain multi-head (group 1), grouped (4 query heads per KV head), one KV head for
# all eight (group 8: multi-query attention).
HEADS = [(4, 4), (8, 2), (8, 1)]


def decode_lengths(page_size):
    """Each sequence's length (its new rows included): none; one key (under causal masking, all
    but the last new row see no key when Nq > 1); whole pages; mid-page; and a long one, which the
    lab cuts into several splits."""
    return [0, 1, 3 * page_size, 2 * page_size + page_size // 2 + 3, 1200]


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 128], ids=lambda d: f"d{d}")
@pytest.mark.parametrize("nq", [1, 4, 16], ids=lambda n: f"nq{n}")
@pytest.mark.parametrize("h_q, h_kv", HEADS, ids=["group1", "group4", "mqa8"])
@pytest.mark.parametrize("page_size", PAGE_SIZES, ids=lambda p: f"page{p}")
def test_decode_matches_reference(page_size, h_q, h_kv, nq, d, dtype, causal):
    seed = seed_of("decode", page_size, h_q, h_kv, nq, d, str(dtype), causal)
    lengths = decode_lengths(page_size)
    q, k_pool, v_pool, table, seqlens = paged_inputs(h_q, h_kv, nq, d, lengths, page_size, dtype, seed)
    o, lse = course_attn.decode(q, k_pool, v_pool, table, seqlens, causal=causal)
    assert o.dtype == dtype and o.shape == q.shape and lse.dtype == torch.float32 and lse.shape == q.shape[:-1]
    assert_all(decode_verdicts(o, lse, q, k_pool, v_pool, table, seqlens, causal),
               f"decode {dtype} page {page_size} H_q {h_q} H_kv {h_kv} Nq {nq} d {d} lengths {lengths} "
               f"causal={causal} seed={seed}")


@pytest.mark.gpu
@pytest.mark.parametrize("num_splits", [1, 3, 64])
def test_split_counts_and_unchecked_tables(num_splits):
    # Any split count gives the same answer within the band; and check=False (no host copy)
    # gives bit for bit what the checked call gives.
    q, k_pool, v_pool, table, seqlens = paged_inputs(8, 2, 4, 128, [700, 5, 64], 64, BF16, seed=5)
    o, lse = course_attn.decode(q, k_pool, v_pool, table, seqlens, causal=True, num_splits=num_splits)
    assert_all(decode_verdicts(o, lse, q, k_pool, v_pool, table, seqlens, True), f"num_splits={num_splits}")
    o2, lse2 = course_attn.decode(q, k_pool, v_pool, table, seqlens, causal=True, num_splits=num_splits, check=False)
    assert torch.equal(bits(o), bits(o2)) and torch.equal(lse, lse2)
    # Tables given on the CPU (as a scheduler holds them): the same again.
    o3, _ = course_attn.decode(q, k_pool, v_pool, table.cpu(), seqlens.cpu(), causal=True, num_splits=num_splits)
    assert torch.equal(bits(o), bits(o3))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("nq", [1, 4, 16], ids=lambda n: f"nq{n}")
@pytest.mark.parametrize("page_size", [16, 64], ids=lambda p: f"page{p}")
def test_append_writes_the_new_rows_and_nothing_else(page_size, nq, dtype):
    h_q, h_kv, d = 8, 2, 64
    seed = seed_of("append", page_size, nq, str(dtype))
    # Lengths with the new rows: shorter than Nq (the first new rows have no place), ending on a
    # page boundary, mid-page, and a new page begun by the new rows.
    lengths = [2, 2 * page_size, page_size + 7, page_size + 1]
    # The cache laid out for the new lengths, then NaN put back where the new rows go: the cache
    # as a server has it before the append, its pages already reserved.
    q, k_pool, v_pool, table, seqlens = paged_inputs(h_q, h_kv, nq, d, lengths, page_size, dtype, seed)
    k_new, v_new = make_inputs([(len(lengths), h_kv, nq, d)] * 2, dtype, seed + 1)
    nan_rows = torch.full_like(k_new, float("nan"))
    k_pool, v_pool = append_rows(k_pool, table, seqlens, nan_rows), append_rows(v_pool, table, seqlens, nan_rows)
    k_expected, v_expected = append_rows(k_pool, table, seqlens, k_new), append_rows(v_pool, table, seqlens, v_new)

    o, lse = course_attn.decode(q, k_pool, v_pool, table, seqlens, causal=True, k_new=k_new, v_new=v_new)
    assert torch.equal(bits(k_pool), bits(k_expected)), "K: the pool differs from the expected append"
    assert torch.equal(bits(v_pool), bits(v_expected)), "V: the pool differs from the expected append"
    # And the decoding saw them: no NaN came out, and o matches the reference on the new cache.
    assert_all(decode_verdicts(o, lse, q, k_pool, v_pool, table, seqlens, True),
               f"append {dtype} page {page_size} Nq {nq} lengths {lengths} seed={seed}")


class PageAllocator:
    """Pages handed out on demand from a shuffled free list, as a server's block manager does;
    the block table lives on the host (the scheduler's copy), and decode copies it to the GPU."""

    def __init__(self, batch, num_pages, max_pages, page_size, seed):
        order = torch.randperm(num_pages, generator=torch.Generator().manual_seed(seed)).tolist()
        # One page is never handed out: the table's unused columns name it, and it holds NaN,
        # so a kernel that read an unused column would show it.
        self.unused_page, self.free = order[0], order[1:]
        self.page_size = page_size
        self.table = torch.full((batch, max_pages), self.unused_page, dtype=I32)
        self.owned = [0] * batch

    def reserve(self, b, length):
        """Enough pages for sequence b to hold `length` keys."""
        while self.owned[b] * self.page_size < length:
            self.table[b, self.owned[b]] = self.free.pop()
            self.owned[b] += 1


@pytest.mark.gpu
def test_generation_loop_with_pages_allocated_on_demand():
    # A one-layer model with fixed random weights generates greedily for four sequences whose
    # prompts differ in length. Each step makes q, k, v for the newest token of every sequence,
    # and decode appends k, v to the paged cache and attends; the reference is attention over
    # each sequence's whole history kept contiguous beside it.
    vocab, width, h_q, h_kv, d, page_size, steps = 96, 64, 8, 2, 64, 16, 24
    g = torch.Generator().manual_seed(6)
    embed, w_q, w_k, w_v, w_out = (torch.randn(*s, generator=g).cuda() for s in
                                   [(vocab, width), (width, h_q * d), (width, h_kv * d), (width, h_kv * d),
                                    (h_q * d, vocab)])
    w_q, w_k, w_v = w_q / width ** 0.5, w_k / width ** 0.5, w_v / width ** 0.5

    def project(tokens):
        """q [n, h_q, 1, d] and k, v [n, h_kv, 1, d] in bf16, one row per token."""
        x = embed[tokens]
        return [(x @ w).view(len(tokens), heads, 1, d).to(BF16) for w, heads in ((w_q, h_q), (w_k, h_kv), (w_v, h_kv))]

    prompts = [torch.randint(vocab, (1 + 7 * b,), generator=g).tolist() for b in range(4)]
    B = len(prompts)
    max_len = max(map(len, prompts)) + steps
    max_pages = pages_for(max_len, page_size)
    num_pages = B * max_pages + 1  # room for every sequence, and the page that stands for "none"
    pages = PageAllocator(B, num_pages, max_pages, page_size, seed=6)
    k_pool = torch.full((num_pages, h_kv, page_size, d), float("nan"), dtype=BF16, device="cuda")
    v_pool = torch.full_like(k_pool, float("nan"))
    # The prompts but their last token go in as a prefill would leave them (in one layer, a
    # token's k and v depend on it alone), through the reference's own writer.
    history_k, history_v, seqlens = [], [], []
    for b, prompt in enumerate(prompts):
        _, k, v = project(torch.tensor(prompt[:-1], dtype=torch.long, device="cuda"))
        k, v = k[:, :, 0].permute(1, 0, 2), v[:, :, 0].permute(1, 0, 2)  # [h_kv, len, d]
        pages.reserve(b, k.shape[1])
        scatter_rows(k_pool, pages.table[b], torch.arange(k.shape[1]), k)
        scatter_rows(v_pool, pages.table[b], torch.arange(k.shape[1]), v)
        history_k.append(k), history_v.append(v), seqlens.append(k.shape[1])

    tokens = torch.tensor([p[-1] for p in prompts], device="cuda")
    generated, expected = [], []
    for step in range(steps):
        for b in range(B):
            seqlens[b] += 1
            pages.reserve(b, seqlens[b])
        q, k_new, v_new = project(tokens)
        o, lse = course_attn.decode(q, k_pool, v_pool, pages.table, torch.tensor(seqlens, dtype=I32), causal=True,
                                    k_new=k_new, v_new=v_new)
        ref_o = []
        for b in range(B):
            history_k[b] = torch.cat([history_k[b], k_new[b]], dim=1)
            history_v[b] = torch.cat([history_v[b], v_new[b]], dim=1)
            kb, vb = (expand_kv_heads(h, h_q)[None] for h in (history_k[b], history_v[b]))
            assert_all(forward_verdicts(o[b:b + 1], lse[b:b + 1], q[b:b + 1], kb, vb, True),
                       f"step {step} sequence {b} (length {seqlens[b]})")
            ref_o.append(math_attention(q[b:b + 1].double(), kb.double(), vb.double(), True)[0])
        # Greedy next tokens from the kernel's output, and the reference's on the same history (the
        # loop goes on with the kernel's). bf16 output moves a logit a little, enough to flip a
        # near tie the reference barely decides: the tokens must agree at most steps, not all.
        tokens = (o.double().reshape(B, -1) @ w_out.double()).argmax(-1)
        generated.append(tokens.tolist())
        expected.append((torch.cat(ref_o).reshape(B, -1) @ w_out.double()).argmax(-1).tolist())
    same = sum(g == e for step_g, step_e in zip(generated, expected) for g, e in zip(step_g, step_e))
    assert same >= 0.9 * steps * B, f"only {same} of {steps * B} greedy tokens equal the reference's"
    # The cache holds every sequence's whole history, in its pages.
    for b in range(B):
        assert torch.equal(bits(gather_pages(k_pool, pages.table[b], seqlens[b])), bits(history_k[b]))
        assert torch.equal(bits(gather_pages(v_pool, pages.table[b], seqlens[b])), bits(history_v[b]))


@pytest.mark.gpu
def test_wrong_block_table_is_caught():
    # The planted bug: decode reads through a block table rolled by one page, and the comparison
    # with the right table must fail (test_the_comparison_rejects_a_rolled_block_table says why
    # causal and Nq > 1). Lengths ending mid-page would also bring NaN rows in; these are whole
    # pages, so only the order of the keys can give the bug away.
    page_size = 16
    q, k_pool, v_pool, table, seqlens = paged_inputs(8, 2, 4, 64, [48, 64, 32], page_size, BF16, seed=7)
    o, lse = course_attn.decode(q, k_pool, v_pool, table, seqlens, causal=True)
    assert_all(decode_verdicts(o, lse, q, k_pool, v_pool, table, seqlens, True), "the right table")
    wrong = rolled_table(table, seqlens, page_size)
    o, lse = course_attn.decode(q, k_pool, v_pool, wrong, seqlens, causal=True)
    bad = failures(decode_verdicts(o, lse, q, k_pool, v_pool, table, seqlens, True))
    assert len(bad) >= 3, "decode through a rolled block table passed the comparison: " + "; ".join(bad)


# ---------------------------------------------------------------------------------------------
# Bad input: a Python exception that says what is wrong, never a crash.

def good_call(**changes):
    """The arguments of a valid call (two sequences, GQA 4:2, Nq = 2, pages of 16), with `changes`."""
    q, k_pool, v_pool, table, seqlens = paged_inputs(4, 2, 2, 64, [5, 40], 16, BF16, seed=8)
    args = dict(q=q, k_cache=k_pool, v_cache=v_pool, block_table=table, seqlens=seqlens)
    args.update(changes)
    return args


def call_with(**changes):
    args = good_call(**changes)
    options = {name: args.pop(name) for name in list(args) if name not in ("q", "k_cache", "v_cache", "block_table",
                                                                           "seqlens")}
    return course_attn.decode(args["q"], args["k_cache"], args["v_cache"], args["block_table"], args["seqlens"],
                              **options)


def cache_of(page_size=16, h_kv=2, d=64, dtype=BF16):
    k_pool, v_pool, table = page_cache(*make_inputs([(2, h_kv, 40, d)] * 2, dtype, seed=9), [5, 40], page_size, 9)
    return dict(k_cache=k_pool, v_cache=v_pool, block_table=table)


BAD_CALLS = {
    "fp32": (lambda: dict(q=torch.randn(2, 4, 2, 64, device="cuda"), **cache_of(dtype=torch.float32)), TypeError,
             "lab 6's paged decoding takes torch.bfloat16 and torch.float16, not torch.float32"),
    "mixed dtypes": (lambda: cache_of(dtype=F16), TypeError, "k_cache is torch.float16 but q is torch.bfloat16"),
    "int64 table": (lambda: dict(block_table=good_call()["block_table"].long()), TypeError,
                    "block_table must be torch.int32, not torch.int64"),
    "float lengths": (lambda: dict(seqlens=torch.tensor([5.0, 40.0], device="cuda")), TypeError,
                      "seqlens must be torch.int32"),
    "q on the CPU": (lambda: dict(q=good_call()["q"].cpu()), ValueError, "q must be a CUDA tensor, got one on cpu"),
    "cache not contiguous": (lambda: dict(k_cache=good_call()["k_cache"].transpose(1, 2)), ValueError,
                             "k_cache is not contiguous"),
    "table not contiguous": (lambda: dict(block_table=good_call()["block_table"].t().contiguous().t()), ValueError,
                             "block_table is not contiguous"),
    "k and v caches differ": (lambda: dict(v_cache=good_call()["v_cache"][:-1].contiguous()), ValueError,
                              "k_cache and v_cache must have the same shape"),
    "cache of another d": (lambda: cache_of(d=128), ValueError, "with q's d = 64"),
    "table of another B": (lambda: dict(block_table=good_call()["block_table"][:1].contiguous()), ValueError,
                           r"block_table must be \[B, max_pages\] with B = 2"),
    "lengths of another B": (lambda: dict(seqlens=torch.tensor([5, 40, 1], dtype=I32, device="cuda")), ValueError,
                             r"seqlens must be \[B\] with B = 2"),
    "H_q not a multiple of H_kv": (lambda: cache_of(h_kv=3), ValueError,
                                   "H_q = 4 query heads must be a multiple of H_kv = 3"),
    "page size 24": (lambda: cache_of(page_size=24), ValueError, "page_size must be a power of two from 16 to 256"),
    "page size 8": (lambda: cache_of(page_size=8), ValueError, "page_size must be a power of two from 16 to 256"),
    "page size 512": (lambda: cache_of(page_size=512), ValueError, "page_size must be a power of two from 16 to 256"),
    "head dimension 96": (lambda: dict(q=make_inputs([(2, 4, 2, 96)], BF16, 9)[0], **cache_of(d=96)), ValueError,
                          "head dimension d must be 64 or 128, got 96"),
    "Nq 17": (lambda: dict(q=make_inputs([(2, 4, 17, 64)], BF16, 9)[0]), ValueError,
              "Nq = 17 new query rows per sequence is more than 16"),
    "length past the table": (lambda: dict(seqlens=torch.tensor([5, 65], dtype=I32, device="cuda")), ValueError,
                              r"seqlens\[1\] = 65 is outside \[0, max_pages \* page_size = 64\]"),
    "negative length": (lambda: dict(seqlens=torch.tensor([-1, 40], dtype=I32, device="cuda")), ValueError,
                        r"seqlens\[0\] = -1 is outside"),
    "length past the table, on the CPU": (lambda: dict(seqlens=torch.tensor([5, 65], dtype=I32)), ValueError,
                                          r"seqlens\[1\] = 65 is outside"),
    "page outside the pool": (lambda: dict(block_table=good_call()["block_table"].index_fill(1, torch.tensor(
        [0], device="cuda"), 99)), ValueError, r"block_table\[0\]\[0\] = 99 is not a page of the pool"),
    "k_new alone": (lambda: dict(k_new=torch.zeros(2, 2, 2, 64, dtype=BF16, device="cuda")), ValueError,
                    "give k_new and v_new together"),
    "k_new of another shape": (lambda: dict(k_new=torch.zeros(2, 4, 2, 64, dtype=BF16, device="cuda"),
                                            v_new=torch.zeros(2, 4, 2, 64, dtype=BF16, device="cuda")), ValueError,
                               r"k_new must be \[B, H_kv, Nq, d\] = \[2, 2, 2, 64\]"),
    "negative num_splits": (lambda: dict(num_splits=-1), ValueError, "num_splits must be >= 1, or 0"),
    "num_splits not an int": (lambda: dict(num_splits=1.5), TypeError, "num_splits must be an int"),
    "negative scale": (lambda: dict(scale=-1.0), ValueError, "scale must be a finite number > 0"),
    "scale that fp32 rounds to 0": (lambda: dict(scale=1e-50), ValueError, "outside fp32's normal range"),
    "scale that fp32 cannot hold": (lambda: dict(scale=1e39), ValueError, "outside fp32's normal range"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_input(name):
    changes, error, match = BAD_CALLS[name]
    with pytest.raises(error, match=match):
        call_with(**changes())


@pytest.mark.gpu
def test_a_rejected_call_leaves_the_cache_as_it_was():
    args = good_call()
    before = args["k_cache"].clone()
    k_new = torch.ones(2, 2, 2, 64, dtype=BF16, device="cuda")
    with pytest.raises(ValueError, match="is outside"):
        course_attn.decode(args["q"], args["k_cache"], args["v_cache"], args["block_table"],
                           torch.tensor([5, 65], dtype=I32, device="cuda"), k_new=k_new, v_new=k_new)
    torch.cuda.synchronize()
    assert torch.equal(bits(args["k_cache"]), bits(before))
    o, _ = course_attn.decode(**args)  # and the process still works
    assert bool(torch.isfinite(o).all())


@pytest.mark.extension
def test_cpu_tensors(ext):
    q = torch.randn(1, 4, 1, 64, dtype=BF16)
    pool = torch.randn(2, 2, 16, 64, dtype=BF16)
    with pytest.raises(ValueError, match="q must be a CUDA tensor, got one on cpu"):
        course_attn.decode(q, pool, pool, torch.zeros(1, 1, dtype=I32), torch.ones(1, dtype=I32))

