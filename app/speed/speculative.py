"""Decode speed with speculative decoding: by a draft model (``-md`` with ``--spec-type draft-simple``) or by the
model's own NextN/MTP layers (``--spec-type draft-mtp`` without ``-md``).

One step of llama.cpp's draft-simple loop (``common_speculative_impl_draft_simple``, common/speculative.cpp)
drafts up to ``n`` tokens with the draft model, one at a time, then the target checks them in one batch of
``n + 1``. With each drafted token accepted with probability ``a`` (independently: the usual model of
Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding"), a step yields
``(1 - a**(n+1)) / (1 - a)`` tokens on average. The rate ``a`` depends on the pair of models and on the text;
it is a figure the user sets (llama-server reports the measured one: ``draft acceptance rate`` in its log and
``/slots``). Drafting stops early at low confidence (``--spec-draft-p-min``); a step is taken here as always
drafting ``n``, which bounds its cost from above.

draft-mtp (``common_speculative_impl_draft_mtp``, common/speculative.cpp) drafts the same way on a second context
(``LLAMA_CONTEXT_TYPE_MTP``) over the main model's NextN layer(s): ``draft()`` decodes one token a pass, ``n`` passes,
each the NextN block (``graph_mtp``: eh_proj over the token's embedding and the target's hidden row, one decoder
block, its norm) and the LM head over the vocabulary (``nextn.shared_head_head``, else the model's ``output``: it
may sit on another device); after the target's batch of ``n + 1``, ``process()`` runs the NextN block once more
over that batch (the catch-up that fills the MTP cache, no output rows, so no head) because the server drops the
draft context's drafted cells (``llama_memory_seq_rm`` from ``pos_max + 1``, tools/server/server-context.cpp,
TAG_SPEC_AVOID_DRAFT_REEVAL). With several NextN layers that do not share the target's cache (step35:
``chain_heads``) draft step ``i`` runs head ``i`` over the ``i + 1`` tokens so far, ``n`` is capped at the heads,
and the catch-up runs every head. Not counted: the recurrent-state snapshots a rolling-back hybrid (qwen35) writes
per verified token (``n_rs_seq``), and attention over the caches (the model alone is predicted at depth 0 too).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lanes import CPU
from ..memory.layout import WeightPlacement
from ..model import Model, Role
from ..model.gguf_reader import TensorInfo
from ..model.hparams import ModelParams
from .predict import SpeedFacts, SpeedParams, hop_cost, type_family

#: the acceptance rate assumed until the user sets one: a same-family small draft on chat text (Qwen3-0.6B for
#: Qwen3-8B and similar pairs) is commonly reported between 0.6 and 0.8 per token
DEFAULT_ACCEPTANCE = 0.7


@dataclass(frozen=True)
class SpeculativeDecode:
    tokens_per_s: float  # with speculation
    plain_tokens_per_s: float  # the target alone
    tokens_per_step: float  # expected accepted tokens (plus the target's own) per step
    step_seconds: float
    draft_seconds: float  # drafting n tokens
    verify_seconds: float  # the target's batch of n + 1
    n_draft: int
    acceptance: float
    notes: tuple[str, ...] = ()
    catchup_seconds: float = 0.0  # draft-mtp: the NextN block over the verified batch (process())
    mtp: bool = False  # drafted by the model's own NextN layers (--spec-type draft-mtp), not by -md
    measured: str = ""  # how the prediction compared with llama-server for this kind of draft (default: -md's)

    @property
    def speedup(self) -> float:
        return self.tokens_per_s / self.plain_tokens_per_s if self.plain_tokens_per_s else 0.0

    @property
    def label(self) -> str:
        return "with MTP drafting" if self.mtp else "with the draft"

    @property
    def bound(self) -> str:
        """How far below the figure llama-server measured (benchmarks/bench_speculative.py, docs/speed-model.md)."""
        return self.measured or (MTP_BOUND if self.mtp else DRAFT_BOUND)

    def text(self) -> str:
        return (
            f"{self.label}: {self.tokens_per_s:.1f} tok/s ({self.speedup:.2f}x the {self.plain_tokens_per_s:.1f} "
            f"of the model alone) at an acceptance rate of {self.acceptance:.0%} for {self.n_draft} drafted tokens "
            f"a step ({self.tokens_per_step:.2f} tokens a step); {self.bound}"
        )


#: the measured shortfall of the prediction (benchmarks/bench_speculative.py on this project's 2-core CPU)
DRAFT_BOUND = "an upper bound: on a 2-core CPU llama-server measured 40-52% less (docs/speed-model.md)"
DFLASH_BOUND = (
    "on a 2-core CPU llama-server measured from 0% to 17% above this figure with a DFlash head, the model alone "
    "43% above its own in the same runs (docs/speed-model.md)"
)
DSV4_DSPARK_BOUND = (
    "not measured against llama-server with a DeepSeek-V4 DSpark head (its MoE stages counted as the model's own "
    "MoE layers are: docs/speed-model.md)"
)
EAGLE3_BOUND = (
    "on a 2-core CPU llama-server measured from 24% below to 24% above this figure with an EAGLE-3 head "
    "(docs/speed-model.md)"
)
ASSISTANT_BOUND = (
    "not measured against llama-server: a draft model's formula, which on a 2-core CPU came out 67-108% above "
    "llama-server's speed for a draft model (llama-server measured 40-52% less; docs/speed-model.md)"
)
MTP_BOUND = (
    "an upper bound: on a 2-core CPU llama-server measured a gain over the model alone 15-40% below this one "
    "(the model's batch of n + 1 costs about n + 1 decodes there; docs/speed-model.md)"
)


def expected_tokens(acceptance: float, n_draft: int) -> float:
    """Tokens a step yields on average: the accepted prefix of ``n_draft`` drafts plus the target's own."""
    a = min(max(acceptance, 0.0), 1.0)
    if a >= 1.0:
        return float(n_draft + 1)
    return (1.0 - a ** (n_draft + 1)) / (1.0 - a)


#: measured on this project's 2-core machine (benchmarks/bench_speculative.py): the model and the draft both on
#: the CPU, acceptance 1.0, 3 drafted tokens: 5.6 tok/s with llama.cpp's default thread polling, 8.8 with
#: ``--poll 0 --spec-draft-poll 0`` (the model alone: 9.4); each context's thread pool spins while the other runs
POLL_ADVICE = (
    "the model and the draft both run on the CPU: their thread pools poll for work and slow each other down on "
    "a CPU with few cores; try --poll 0 --spec-draft-poll 0 (measured on 2 cores: 5.6 tok/s with the default "
    "polling, 8.8 without)"
)


def speculative_decode(
    plain_seconds: float,
    verify_seconds: float,
    draft_token_seconds: float,
    n_draft: int,
    acceptance: float,
    notes: tuple[str, ...] = (),
    measured: str = "",
) -> SpeculativeDecode:
    """Decode rate with a draft. ``plain_seconds``: the target's time per token alone; ``verify_seconds``: its
    time for one batch of ``n_draft + 1`` tokens; ``draft_token_seconds``: the draft's time per token;
    ``measured``: what to say of the figure where it is not the draft model's (:data:`DRAFT_BOUND`)."""
    if draft_token_seconds < 0:
        raise ValueError("speculative decoding needs a draft time of 0 or more")
    return step_decode(
        plain_seconds, verify_seconds, n_draft * draft_token_seconds, 0.0, n_draft, acceptance, notes, measured=measured
    )


def step_decode(
    plain_seconds: float,
    verify_seconds: float,
    draft_seconds: float,
    catchup_seconds: float,
    n_draft: int,
    acceptance: float,
    notes: tuple[str, ...],
    mtp: bool = False,
    measured: str = "",
) -> SpeculativeDecode:
    """One step: drafting (``draft_seconds`` in all), the target's batch of ``n_draft + 1`` and the catch-up pass
    (draft-mtp's, or an EAGLE-3 / DFlash head's: :func:`eagle3_passes`, :func:`dflash_passes`); it yields
    :func:`expected_tokens`. ``measured``: what llama-server measured against this figure, said with it."""
    if plain_seconds <= 0 or verify_seconds <= 0 or draft_seconds < 0 or catchup_seconds < 0 or n_draft < 0:
        raise ValueError("speculative decoding needs positive step times and a drafted-token count of 0 or more")
    per_step = expected_tokens(acceptance, n_draft)
    step = draft_seconds + verify_seconds + catchup_seconds
    return SpeculativeDecode(
        per_step / step,
        1.0 / plain_seconds,
        per_step,
        step,
        draft_seconds,
        verify_seconds,
        n_draft,
        acceptance,
        notes,
        catchup_seconds,
        mtp,
        measured,
    )


@dataclass(frozen=True)
class MtpPass:
    """One decode of the MTP context: seconds, and the weight bytes each device reads."""

    seconds: float
    device_bytes: dict[str, float]


def _head_tensor(model: Model, nextn_layer: int) -> int:
    """The LM head a NextN layer's ``graph_mtp`` multiplies by: ``nextn.shared_head_head`` when the file has it,
    else the model's ``output`` (``token_embd`` when tied: ``TENSOR_DUPLICATED``), as in every architecture's
    graph_mtp (src/models/qwen35.cpp, glm4-moe.cpp, deepseek2.cpp, ...: ``head_w``)."""
    names = {t.name: i for i, t in enumerate(model.tensors)}
    for name in (f"blk.{nextn_layer}.nextn.shared_head_head.weight", "output.weight", "token_embd.weight"):
        if name in names:
            return names[name]
    raise ValueError("the model has no LM head for its MTP layer")


class _Reads:
    """What one ``llama_process`` reads: weight bytes per device, and per device the elements its kernels go over
    by ggml type family (the CPU's vector work)."""

    def __init__(self) -> None:
        self.read: dict[str, float] = {}
        self.elems: dict[str, dict[str, float]] = {}

    def add(self, dev: str, nbytes: float, fam: str, n_elem: float) -> None:
        self.read[dev] = self.read.get(dev, 0.0) + nbytes
        fams = self.elems.setdefault(dev, {})
        fams[fam] = fams.get(fam, 0.0) + n_elem

    def weight(self, dev: str, t: TensorInfo, n_tokens: int) -> None:
        """A weight read once for the batch, its elements once per token where it is a matrix."""
        self.add(
            dev, float(t.nbytes), type_family(t.type_id), n_tokens * float(t.n_elements) if len(t.shape) > 1 else 0.0
        )

    def experts(self, dev: str, nbytes: float, n_elem: float, fam: str, p: ModelParams, n_tokens: int) -> None:
        """A routed expert tensor (``nbytes``, ``n_elem`` over all experts) read by ``n_tokens`` tokens of a model
        with params ``p``: the share of experts they touch (each token ``n_expert_used`` of ``n_expert``), each
        token's kernels over its own experts' elements."""
        frac = p.n_expert_used / p.n_expert if p.n_expert else 1.0
        touched = p.n_expert * (1 - (1 - frac) ** n_tokens) / p.n_expert_used if p.n_expert else 1.0
        self.add(dev, nbytes * frac * touched, fam, n_tokens * n_elem * frac)

    def seconds(self, params: SpeedParams, path: list[str], n_embd: int, n_tokens: int, threads: int | None) -> float:
        """The same terms as :func:`~app.speed.predict.predict_decode`: per device the bytes at its rate, the
        CPU's kernels over the elements, a hop wherever ``path`` changes device, and one ``token_overhead``."""
        secs = 0.0
        for dev, nbytes in self.read.items():
            d = params.get(dev)
            rate = d.ram_rate(threads if dev == CPU else None) if d.is_cpu else d.bandwidth * d.eff_bandwidth
            secs += nbytes / rate
            if d.is_cpu:
                work = sum(e * d.type_cost.get(fam, 1.0) for fam, e in self.elems.get(dev, {}).items())
                secs += work / d.vec_rate(threads if dev == CPU else None)
        for a, b in zip(path, path[1:]):
            if a != b:
                secs += hop_cost(params.get(a), params.get(b), n_embd, n_tokens)
        return secs + params.token_overhead


def mtp_pass(
    model: Model,
    wp: WeightPlacement,
    params: SpeedParams,
    nextn_layer: int,
    n_tokens: int,
    head: bool,
    facts: SpeedFacts | None = None,
    threads: int | None = None,
) -> MtpPass:
    """Seconds of one ``llama_process`` on the MTP context: the NextN block ``nextn_layer`` over ``n_tokens``
    tokens and, when ``head``, the LM head for one output row (a draft step asks logits of its last token only).

    The same terms as :func:`~app.speed.predict.predict_decode` for the main model: per device the weight bytes
    read once for the batch (routed experts: the share ``n_tokens`` tokens touch), the CPU's kernels over the
    elements per token, a hop wherever the pass changes device (the input rows come from the host), and one
    ``token_overhead``. The token embedding (``nextn.embed_tokens``, else ``token_embd``) is one row per token."""
    if n_tokens < 1:
        raise ValueError("an MTP pass decodes one token or more")
    p = model.params
    facts = facts if facts is not None and facts.model is model else SpeedFacts(model)
    head_i = _head_tensor(model, nextn_layer)
    reads = _Reads()
    ffn: dict[str, float] = {}
    attn_dev = ""
    own_embd = False

    def dev_of(i: int) -> str:
        dev = wp.tensor_device[i]
        if not dev:
            raise ValueError(
                f"{model.tensors[i].name} is not loaded: the MTP layers' weights load with --spec-type draft-mtp"
            )
        return dev

    def add(i: int, nbytes: float, n_elem: float) -> None:
        reads.add(dev_of(i), nbytes, facts.types[i], n_elem)

    for i, (t, (layer, role, nextn)) in enumerate(zip(model.tensors, facts.roles)):
        if not nextn or layer != nextn_layer or i == head_i:
            continue
        matrix = len(t.shape) > 1
        if ".nextn.embed_tokens." in t.name:  # get_rows: one row per token
            own_embd = True
            add(i, n_tokens * t.nbytes / max(p.n_vocab, 1), 0.0)
        elif role is Role.EXPERTS:
            reads.experts(dev_of(i), float(t.nbytes), float(t.n_elements), facts.types[i], p, n_tokens)
        else:
            add(i, float(t.nbytes), n_tokens * float(t.n_elements) if matrix else 0.0)
        if role in (Role.FFN, Role.EXPERTS):
            ffn[wp.tensor_device[i]] = ffn.get(wp.tensor_device[i], 0.0) + t.nbytes
        elif role is Role.ATTN and not attn_dev:
            attn_dev = wp.tensor_device[i]
    if not reads.read:
        raise ValueError(f"the model has no NextN layer {nextn_layer}")
    if not own_embd:
        emb = next((i for i, t in enumerate(model.tensors) if t.name == "token_embd.weight"), None)
        if emb is not None:
            add(emb, n_tokens * model.tensors[emb].nbytes / max(p.n_vocab, 1), 0.0)
    if head:
        add(head_i, float(model.tensors[head_i].nbytes), float(model.tensors[head_i].n_elements))
    layer_dev = wp.layer_device[nextn_layer] if nextn_layer < len(wp.layer_device) else CPU
    path = [CPU, attn_dev or layer_dev, *sorted(ffn, key=lambda k: -ffn[k])]
    if head:
        path.append(wp.tensor_device[head_i])
    path.append(CPU)
    return MtpPass(reads.seconds(params, path, p.n_embd, n_tokens, threads), reads.read)


def mtp_n_draft(model: Model, n_draft: int) -> int:
    """Tokens draft-mtp drafts a step at most: ``--spec-draft-n-max``, capped at the heads with chained heads
    (``common_speculative_impl_draft_mtp`` ctor: ``params.n_max = min(n_max, n_mtp_layers)``)."""
    n_heads = model.params.nextn_layers
    return min(n_draft, n_heads) if n_heads > 1 else n_draft


def mtp_decode(
    model: Model,
    wp: WeightPlacement,
    params: SpeedParams,
    plain_seconds: float,
    verify_seconds: float,
    n_draft: int,
    acceptance: float,
    facts: SpeedFacts | None = None,
    threads: int | None = None,
    notes: tuple[str, ...] = (),
) -> SpeculativeDecode:
    """Decode rate with ``--spec-type draft-mtp``: ``verify_seconds`` is the target's batch of ``n_draft + 1``
    as for ``-md``; the draft steps and the catch-up are :func:`mtp_pass` es over the NextN layers
    (``common_speculative_impl_draft_mtp::draft`` and ``::process``)."""
    p = model.params
    if not p.nextn_layers:
        raise ValueError("the model has no NextN/MTP layers")
    first = p.n_layer - p.nextn_layers
    chain = p.nextn_layers > 1  # chain_heads: n_mtp_layers > 1 and a cache of its own
    n = mtp_n_draft(model, n_draft)
    draft_s = sum(
        mtp_pass(model, wp, params, first + (i if chain else 0), i + 1 if chain else 1, True, facts, threads).seconds
        for i in range(n)
    )
    heads = range(p.nextn_layers) if chain else range(1)
    catchup = sum(mtp_pass(model, wp, params, first + h, n + 1, False, facts, threads).seconds for h in heads)
    return step_decode(plain_seconds, verify_seconds, draft_s, catchup, n, acceptance, notes, mtp=True)


#: tensors of an EAGLE-3 head that only its encoder reads (``llama_model_eagle3::graph<true>``: the fused target
#: features through ``fc``, after ``enc.output_norm`` with ``norm_before_fc``), and the vocabulary map the sampler
#: reads on the host
_EAGLE3_ENCODER = ("fc.weight", "enc.output_norm.weight")


def _lm_head(
    head: Model,
    head_wp: WeightPlacement,
    target: Model,
    target_wp: WeightPlacement,
    names: dict[str, int],
    tnames: dict[str, int],
    own_tied: bool,
) -> tuple[str, float, str, float]:
    """(device, bytes, type family, elements) of the lm_head a draft head's decoder reads: its ``output``, its own
    ``token_embd`` where ``own_tied`` (a DFlash head's TENSOR_DUPLICATED lm_head), else the target's
    (``ctx_other``: its ``output``, or its tied embeddings' copy on the output device)."""
    for name in ("output.weight", "token_embd.weight") if own_tied else ("output.weight",):
        if name in names:
            i = names[name]
            t = head.tensors[i]
            dev = head_wp.tensor_device[i] if name == "output.weight" else head_wp.duplicated_output
            return dev or head_wp.tensor_device[i], float(t.nbytes), type_family(t.type_id), float(t.n_elements)
    i = tnames.get("output.weight", tnames.get("token_embd.weight", -1))
    if i < 0:
        raise ValueError(f"neither the {head.params.arch} head nor its target has an lm_head")
    t = target.tensors[i]
    dev = (
        target_wp.tensor_device[i]
        if t.name == "output.weight"
        else (target_wp.duplicated_output or target_wp.tensor_device[i])
    )
    return dev, float(t.nbytes), type_family(t.type_id), float(t.n_elements)


def eagle3_passes(
    head: Model,
    head_wp: WeightPlacement,
    target: Model,
    target_wp: WeightPlacement,
    params: SpeedParams,
    n_draft: int,
    threads: int | None = None,
) -> tuple[float, float]:
    """(drafting, catch-up) seconds of one ``--spec-type draft-eagle3`` step with the head ``head``
    (``common_speculative_impl_draft_eagle3``, common/speculative.cpp).

    ``draft()`` decodes ``n_draft`` times one token: the head's decoder layer over the token's embedding and the
    previous position's features, ``output_norm`` and the lm_head (the head's ``output``, else the target's;
    the embedding row is the head's ``token_embd``, else the target's). ``process()`` then runs the encoder over
    the target's batch of ``n_draft + 1`` (``fc`` over the three extracted layers' rows) and the decoder over
    ``n_draft`` of them, the lm_head included: the EAGLE-3 graph selects no output rows."""
    names = {t.name: i for i, t in enumerate(head.tensors)}
    tnames = {t.name: i for i, t in enumerate(target.tensors)}
    n_vocab = max(target.params.n_vocab, 1)

    def decoder(n_tokens: int) -> float:
        reads = _Reads()
        for i, t in enumerate(head.tensors):
            if t.name in _EAGLE3_ENCODER or t.name in ("d2t", "output.weight", "token_embd.weight"):
                continue
            reads.weight(head_wp.tensor_device[i], t, n_tokens)
        if "token_embd.weight" in names:  # one embedding row per token
            i = names["token_embd.weight"]
            reads.add(head_wp.tensor_device[i], n_tokens * head.tensors[i].nbytes / n_vocab, "f32", 0.0)
        elif "token_embd.weight" in tnames:
            i = tnames["token_embd.weight"]
            reads.add(target_wp.tensor_device[i], n_tokens * target.tensors[i].nbytes / n_vocab, "f32", 0.0)
        dev, nbytes, fam, elems = _lm_head(head, head_wp, target, target_wp, names, tnames, own_tied=False)
        reads.add(dev, nbytes, fam, n_tokens * elems)
        path = [CPU, head_wp.layer_device[0] if head_wp.layer_device else CPU, dev, CPU]
        return reads.seconds(params, path, head.params.n_embd, n_tokens, threads)

    def encoder(n_tokens: int) -> float:
        reads = _Reads()
        devs = []
        for name in _EAGLE3_ENCODER:
            i = names.get(name)
            if i is None:
                continue
            devs.append(head_wp.tensor_device[i])
            reads.weight(head_wp.tensor_device[i], head.tensors[i], n_tokens)
        if not devs:
            raise ValueError("the EAGLE-3 head has no fc.weight")
        return reads.seconds(params, [CPU, devs[0], CPU], 3 * target.params.n_embd, n_tokens, threads)

    if n_draft < 1:
        raise ValueError("an EAGLE-3 step drafts one token or more")
    return n_draft * decoder(1), encoder(n_draft + 1) + decoder(n_draft)


#: what a DFlash head's injection pass (``process()``: an embeddings batch of the target's fused layer inputs)
#: reads besides each layer's K and V projections
_DFLASH_INJECT = ("fc.weight", "fc.scale", "enc.output_norm.weight")
#: and per layer: K and V (with K's norm), or a DeepSeek-V4 DSpark stage's one K row (``attn_kv`` and its norm)
_DFLASH_INJECT_KV = (
    ".attn_k.weight",
    ".attn_v.weight",
    ".attn_k_norm.weight",
    ".attn_kv.weight",
    ".attn_kv_a_norm.weight",
)
#: the DSpark Markov head's and DFlash2 selector's tables, read a few rows at a time (GET_ROWS)
_DFLASH_ROWS = ("markov_w1.weight", "selector_successor.weight", "selector_predecessor.weight")


def dflash_n_draft(head: Model, n_draft: int, dspark: bool) -> int:
    """The tokens a DFlash step drafts: ``--spec-draft-n-max`` clamped to the trained block (``block_size - 1``,
    a DSpark head sampling from its anchor ``block_size``: ``common_speculative_impl_draft_dflash``)."""
    # common_speculative_impl_draft_dflash: 16 unless the file says (atoi of its string: an explicit 0 drafts none)
    block = int(head.params.dflash["block_size"]) if "dflash.block_size" in head.metadata else 16
    return max(0, min(n_draft, block if dspark and head.params.dflash["sample_from_anchor"] else block - 1))


def dflash_passes(
    head: Model,
    head_wp: WeightPlacement,
    target: Model,
    target_wp: WeightPlacement,
    params: SpeedParams,
    n_draft: int,
    dspark: bool,
    threads: int | None = None,
) -> tuple[float, float]:
    """(drafting, catch-up) seconds of one ``--spec-type draft-dflash`` / ``draft-dspark`` step with the head
    ``head`` (``common_speculative_impl_draft_dflash``, common/speculative.cpp; src/models/dflash.cpp).

    ``draft()`` decodes the whole block at once: ``[last token, <mask> x n]`` (a DSpark head sampling from its
    anchor: ``n`` tokens) through every layer, ``output_norm`` and the lm_head over every position (its
    ``output``, its own ``token_embd``, else the target's), plus DSpark's Markov head (``markov_w2`` once per
    drafted position) or DFlash2's selector; a DeepSeek-V4 DSpark head's routed experts are read for the share of
    experts the block's tokens touch. ``process()`` then injects the target's batch of ``n + 1`` rows: ``fc`` and
    ``enc.output_norm`` over the fused layer inputs, and each layer's K and V projections into the cache (no
    queries, no FFN, no head)."""
    names = {t.name: i for i, t in enumerate(head.tensors)}
    tnames = {t.name: i for i, t in enumerate(target.tensors)}
    n_vocab = max(target.params.n_vocab, 1)
    hp = head.params
    n_block = n_draft + (0 if dspark and head.params.dflash["sample_from_anchor"] else 1)
    skip = {*_DFLASH_INJECT, "d2t", "output.weight", "token_embd.weight", "markov_w2.weight", *_DFLASH_ROWS}
    top_k = int(head.params.dflash.get("selector_top_k", 0))

    def draft() -> float:
        reads = _Reads()
        for i, t in enumerate(head.tensors):
            if t.name in skip:
                continue
            if head.block_of(t.name).role is Role.EXPERTS:  # a DeepSeek-V4 DSpark head's routed experts
                fam = type_family(t.type_id)
                reads.experts(head_wp.tensor_device[i], float(t.nbytes), float(t.n_elements), fam, hp, n_block)
            else:
                reads.weight(head_wp.tensor_device[i], t, n_block)
        if "markov_w2.weight" in names:  # one bias product per drafted position
            i = names["markov_w2.weight"]
            for _ in range(n_draft):
                reads.weight(head_wp.tensor_device[i], head.tensors[i], 1)
        for name, rows in (  # row lookups (GET_ROWS): the previous token's, the candidates'
            ("markov_w1.weight", n_draft),
            ("selector_successor.weight", top_k * n_block),
            ("selector_predecessor.weight", top_k * n_block),
        ):
            if name in names:
                i = names[name]
                t = head.tensors[i]
                reads.add(head_wp.tensor_device[i], min(rows, t.shape[-1]) * t.nbytes / max(t.shape[-1], 1), "f32", 0)
        own = "token_embd.weight" in names
        model, wp, idx = (head, head_wp, names) if own else (target, target_wp, tnames)
        if "token_embd.weight" in idx:  # one embedding row per block token
            i = idx["token_embd.weight"]
            reads.add(wp.tensor_device[i], n_block * model.tensors[i].nbytes / n_vocab, "f32", 0.0)
        dev, nbytes, fam, elems = _lm_head(head, head_wp, target, target_wp, names, tnames, own_tied=True)
        reads.add(dev, nbytes, fam, n_block * elems)
        path = [CPU, head_wp.layer_device[0] if head_wp.layer_device else CPU, dev, CPU]
        return reads.seconds(params, path, head.params.n_embd, n_block, threads)

    def inject(n_tokens: int) -> float:
        reads = _Reads()
        first = None
        for i, t in enumerate(head.tensors):
            kv = t.name.startswith("blk.") and t.name.endswith(_DFLASH_INJECT_KV)
            if t.name in _DFLASH_INJECT or kv:
                first = first or head_wp.tensor_device[i]
                reads.weight(head_wp.tensor_device[i], t, n_tokens)
        if first is None:
            raise ValueError("the DFlash head has no fc.weight")
        return reads.seconds(params, [CPU, first, CPU], head.params.n_embd, n_tokens, threads)

    if n_draft < 1:
        raise ValueError("a DFlash step drafts one token or more")
    return draft(), inject(n_draft + 1)
