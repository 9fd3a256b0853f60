"""Speculative decoding's speed (app.speed.speculative): the accepted-tokens formula, and draft-mtp's step (the
model's NextN layer drafting, common_speculative_impl_draft_mtp) held to hand-computed figures on a placement
whose devices have round numbers."""

from __future__ import annotations

import json

import pytest

from app.command.parse import settings_from_args
from app.lanes import CPU, Lane
from app.model import open_model
from app.placement import Placement
from app.session import Session
from app.speed.predict import GB, DeviceSpeed, SpeedParams
from app.speed.speculative import expected_tokens, mtp_decode, mtp_n_draft, mtp_pass, speculative_decode
from tests import gguf_factory as gf

GPU = "CUDA0"
OVERHEAD = 1e-3
LATENCY = 1e-4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("spec")
    return {a: open_model(gf.write_tiny_model(a, d / f"{a}.gguf", n_nextn=1)) for a in ("qwen35", "qwen35moe")}


def params() -> SpeedParams:
    """The host: 10 GB/s, 2 AVX2 cores at 1 GHz (16e9 elements/s); the GPU: 100 GB/s, a 10 GB/s link."""
    return SpeedParams(
        {
            CPU: DeviceSpeed(CPU, "cpu", 10 * GB, eff_bandwidth=1.0, cores=2, clock_hz=1e9, simd="avx2", eff_vec=1.0),
            GPU: DeviceSpeed(GPU, "gpu", 100 * GB, eff_bandwidth=1.0, link_bandwidth=10 * GB, link_latency=LATENCY),
        },
        token_overhead=OVERHEAD,
    )


def placed(model, args: str):
    lane = Lane(GPU, GPU, 8 << 30, 8 << 30, "gpu", 100 * GB)
    s = settings_from_args(args.split(), tool="server")
    return Placement.from_settings(model, [lane], s).weight_placement(), [lane], s


def _nbytes(model, name: str) -> int:
    return next(t.nbytes for t in model.tensors if t.name == name)


def test_expected_tokens_by_hand():
    assert expected_tokens(0.0, 3) == 1.0
    assert expected_tokens(1.0, 3) == 4.0
    assert expected_tokens(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tokens(0.7, 1) == pytest.approx(1.7)


def test_mtp_pass_counts_the_nextn_block_and_the_head(tiny):
    m = tiny["qwen35"]
    wp, _, _ = placed(m, "-c 4096 -ngl all --spec-type draft-mtp")
    nl = m.params.n_layer - 1  # the NextN block
    block = sum(t.nbytes for t in m.tensors if t.name.startswith(f"blk.{nl}."))
    head = _nbytes(m, "output.weight")  # no nextn.shared_head_head in the file: the model's output
    row = _nbytes(m, "token_embd.weight") / m.params.n_vocab  # the token's embedding row, on the host
    hops = 2 * (LATENCY + m.params.n_embd * 4 / (10 * GB))  # host -> GPU -> host
    one = mtp_pass(m, wp, params(), nl, 1, True)
    assert one.device_bytes[GPU] == pytest.approx(block + head)
    assert one.device_bytes[CPU] == pytest.approx(row)
    assert one.seconds == pytest.approx((block + head) / (100 * GB) + row / (10 * GB) + hops + OVERHEAD)
    # the catch-up over a batch of 4: the block read once, no head, 4 embedding rows, 4 rows over each hop
    four = mtp_pass(m, wp, params(), nl, 4, False)
    assert four.device_bytes[GPU] == pytest.approx(block)
    hops4 = 2 * (LATENCY + m.params.n_embd * 4 * 4 / (10 * GB))
    assert four.seconds == pytest.approx(block / (100 * GB) + 4 * row / (10 * GB) + hops4 + OVERHEAD)


def test_mtp_head_on_the_host_is_read_there(tiny):
    m = tiny["qwen35"]
    wp, _, _ = placed(m, r"-c 4096 -ngl all -ot output\.weight=CPU --spec-type draft-mtp")
    nl = m.params.n_layer - 1
    out = next(t for t in m.tensors if t.name == "output.weight")
    with_head = mtp_pass(m, wp, params(), nl, 1, True)
    without = mtp_pass(m, wp, params(), nl, 1, False)
    assert with_head.device_bytes[CPU] - without.device_bytes[CPU] == pytest.approx(out.nbytes)
    assert with_head.device_bytes[GPU] == pytest.approx(without.device_bytes[GPU])
    # the host reads it at 10 GB/s and runs its elements (f16: cost 1) at 16e9 a second; the hops stay two
    assert with_head.seconds - without.seconds == pytest.approx(out.nbytes / (10 * GB) + out.n_elements / 16e9)


def test_mtp_experts_read_by_the_tokens_routed(tiny):
    m = tiny["qwen35moe"]
    wp, _, _ = placed(m, "-c 4096 -ngl all --spec-type draft-mtp")
    nl = m.params.n_layer - 1
    p = m.params
    exps = sum(t.nbytes for t in m.tensors if t.name.startswith(f"blk.{nl}.") and "_exps" in t.name)
    rest = sum(t.nbytes for t in m.tensors if t.name.startswith(f"blk.{nl}.") and "_exps" not in t.name)
    f = p.n_expert_used / p.n_expert  # 2 of 8
    assert mtp_pass(m, wp, params(), nl, 1, False).device_bytes[GPU] == pytest.approx(rest + exps * f)
    # 4 tokens touch 1 - (1 - 1/4)^4 of the experts
    assert mtp_pass(m, wp, params(), nl, 4, False).device_bytes[GPU] == pytest.approx(rest + exps * (1 - 0.75**4))


def test_mtp_step_grows_with_n_and_acceptance_zero_is_slower(tiny):
    m = tiny["qwen35"]
    wp, _, _ = placed(m, "-c 4096 -ngl all --spec-type draft-mtp")
    nl = m.params.n_layer - 1
    drafted = mtp_pass(m, wp, params(), nl, 1, True).seconds
    plain, verify = 0.01, 0.012
    steps = []
    for n in (1, 2, 3, 6):
        sp = mtp_decode(m, wp, params(), plain, verify, n, 0.0)
        assert sp.mtp and sp.n_draft == n
        assert sp.draft_seconds == pytest.approx(n * drafted)  # n passes of one token with the head
        assert sp.catchup_seconds == pytest.approx(mtp_pass(m, wp, params(), nl, n + 1, False).seconds)
        assert sp.step_seconds == pytest.approx(sp.draft_seconds + verify + sp.catchup_seconds)
        # acceptance 0: one token a step, the target's own, after paying for the drafts: below the plain speed
        assert sp.tokens_per_step == 1.0 and sp.tokens_per_s == pytest.approx(1 / sp.step_seconds)
        assert sp.speedup < 1.0
        steps.append(sp.step_seconds)
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    full = mtp_decode(m, wp, params(), plain, verify, 3, 1.0)
    assert full.tokens_per_s == pytest.approx(4 / full.step_seconds)


def test_draft_model_step_by_hand():
    sp = speculative_decode(0.01, 0.012, 0.002, 3, 0.5)
    assert not sp.mtp and sp.catchup_seconds == 0.0
    assert sp.step_seconds == pytest.approx(0.006 + 0.012)
    assert sp.tokens_per_s == pytest.approx(1.875 / 0.018)
    with pytest.raises(ValueError):
        speculative_decode(0.01, 0.012, -1.0, 3, 0.5)


def test_mtp_needs_the_nextn_weights_loaded(tiny):
    m = tiny["qwen35"]
    wp, _, _ = placed(m, "-c 4096 -ngl all")  # no draft-mtp: llama.cpp skips the NextN tensors
    with pytest.raises(ValueError, match="not loaded"):
        mtp_pass(m, wp, params(), m.params.n_layer - 1, 1, True)
    assert mtp_n_draft(m, 5) == 5  # one NextN layer: no cap on --spec-draft-n-max


def test_session_predicts_mtp_speed(tiny):
    m = tiny["qwen35"]
    for args, want in (("-c 4096 --spec-type draft-mtp --spec-draft-n-max 2", True), ("-c 4096", False)):
        s = settings_from_args(args.split(), tool="server")
        ses = Session(m, [], placement=Placement.from_settings(m, [], s))
        sp = ses.speculative
        assert (sp is not None) is want
        if sp is not None:
            assert sp.mtp and sp.n_draft == 2
            assert sp.plain_tokens_per_s == pytest.approx(ses.decode.tokens_per_s)
            assert "with MTP drafting" in sp.text() and "upper bound" in sp.text()


def test_cli_prints_the_mtp_speed(tiny):
    """``layerdeck estimate`` with --spec-type draft-mtp: the JSON's speculative entry is the session's MTP figure
    (kind "mtp", the catch-up counted) and the text says it as an upper bound."""
    from tests.test_cli import layerdeck

    m = tiny["qwen35"]
    args = ["--acceptance", "0.8", "--", "-m", str(m.path), "-c", "4096", "--spec-type", "draft-mtp"]
    doc = json.loads(layerdeck("estimate", "--json", *args).stdout)
    spec = doc["speed"]["speculative"]
    s = settings_from_args(["-c", "4096", "--spec-type", "draft-mtp"], tool="server")
    ses = Session(m, [], placement=Placement.from_settings(m, [], s))
    ses.set_draft_acceptance(0.8)
    assert spec["kind"] == "mtp" and spec["n_draft"] == 3 and spec["acceptance"] == 0.8
    assert spec["catchup_seconds"] > 0 and spec["tg_tokens_per_s"] == round(ses.speculative.tokens_per_s, 2)
    text = layerdeck("estimate", *args).stdout
    assert "speed with MTP drafting: generation" in text and "upper bound" in text


# --------------------------------------------------------------------------- EAGLE-3 heads and Gemma 4's assistant


@pytest.fixture(scope="module")
def eagle(tmp_path_factory):
    """A tiny llama target, a head with its own lm_head and one that borrows the target's."""
    from tests.factory_models.eagle3 import write_eagle3_draft

    d = tmp_path_factory.mktemp("eagle")
    target = open_model(gf.write_tiny_model("llama", d / "t.gguf"))
    n = gf.tiny_hparams("llama")["n_embd"]
    own = open_model(write_eagle3_draft(d / "own.gguf", n_embd_tgt=n))
    borrow = open_model(write_eagle3_draft(d / "borrow.gguf", n_embd_tgt=n, own_output=False))
    return target, own, borrow


def _head_wp(head, args: str):
    return Placement.from_settings(head, [], settings_from_args(args.split(), tool="server")).weight_placement()


def _cost(tensors, n_tokens: int = 1) -> float:
    """Host seconds of reading ``tensors`` once (10 GB/s) and running the matrices' elements ``n_tokens`` times
    (16e9 a second, every type family at cost 1 in :func:`params`)."""
    return sum(t.nbytes / (10 * GB) + (n_tokens * t.n_elements / 16e9 if len(t.shape) > 1 else 0) for t in tensors)


def test_eagle3_drafts_without_the_encoder_and_catches_up_with_it(eagle):
    """A draft pass reads the decoder layer, output_norm, the lm_head and one embedding row, not fc; the catch-up
    runs fc over n + 1 rows and the decoder (lm_head included: the graph keeps every row) over n. All on the host
    here: no hops, one token_overhead per llama_process."""
    from app.speed.speculative import eagle3_passes

    target, head, _ = eagle
    twp = _head_wp(target, "-c 4096")
    hwp = _head_wp(head, "-c 4096")
    decoder = [t for t in head.tensors if t.name.startswith("blk.0.") or t.name in ("output_norm.weight", "output.weight")]
    fc = [t for t in head.tensors if t.name == "fc.weight"]
    row = _nbytes(target, "token_embd.weight") / target.params.n_vocab  # the head has no token_embd: the target's
    one, _ = eagle3_passes(head, hwp, target, twp, params(), 1)
    assert one == pytest.approx(_cost(decoder) + row / (10 * GB) + OVERHEAD)
    three, catchup = eagle3_passes(head, hwp, target, twp, params(), 3)
    assert three == pytest.approx(3 * one)  # n passes of one token
    assert catchup == pytest.approx(_cost(fc, 4) + _cost(decoder, 3) + 3 * row / (10 * GB) + 2 * OVERHEAD)
    with pytest.raises(ValueError):
        eagle3_passes(head, hwp, target, twp, params(), 0)


def test_eagle3_without_an_lm_head_reads_the_targets_where_it_lives(eagle):
    """A head without output.weight multiplies by the target's: with the target's output on the GPU, its bytes
    are read there (100 GB/s, no host kernels), and the pass hops to the GPU and back."""
    from app.speed.speculative import eagle3_passes

    target, _, head = eagle
    hwp = _head_wp(head, "-c 4096")
    lane = Lane(GPU, GPU, 8 << 30, 8 << 30, "gpu", 100 * GB)
    host = Placement.from_settings(target, [lane], settings_from_args("-c 4096 -ngl 0".split(), tool="server"))
    gpu = Placement.from_settings(target, [lane], settings_from_args("-c 4096 -ngl all".split(), tool="server"))
    on_host, _ = eagle3_passes(head, hwp, target, host.weight_placement(), params(), 1)
    on_gpu, _ = eagle3_passes(head, hwp, target, gpu.weight_placement(), params(), 1)
    out = next(t for t in target.tensors if t.name == "output.weight")
    hops = 2 * (LATENCY + head.params.n_embd * 4 / (10 * GB))
    assert on_host - on_gpu == pytest.approx(_cost([out]) - out.nbytes / (100 * GB) - hops)


def test_session_predicts_eagle3_and_assistant_speed(eagle, tmp_path):
    """draft-eagle3 with a head, draft-mtp with Gemma 4's assistant: the session's speculative figure, with the
    type each file drafts with and no figure for another type."""
    from tests.factory_models.gemma4_assistant import write_gemma4_assistant

    target, head, _ = eagle
    for spec, want in (("draft-eagle3", True), ("draft-simple", False)):
        s = settings_from_args(f"-c 4096 -md {head.path} --spec-type {spec} --spec-draft-n-max 3".split(),
                               tool="server")
        ses = Session(target, [], placement=Placement.from_settings(target, [], s), draft=head)
        sp = ses.speculative
        assert (sp is not None) is want, spec
        if sp is not None:
            assert not sp.mtp and sp.n_draft == 3 and sp.catchup_seconds > 0 and "EAGLE-3 head" in sp.text()
            assert sp.step_seconds == pytest.approx(sp.draft_seconds + sp.verify_seconds + sp.catchup_seconds)
    g4 = open_model(gf.write_tiny_model("gemma4", tmp_path / "g4.gguf"))
    assistant = open_model(write_gemma4_assistant(tmp_path / "a.gguf", n_embd_tgt=g4.params.n_embd,
                                                  n_vocab=g4.params.n_vocab))
    s = settings_from_args(f"-c 4096 -md {assistant.path} --spec-type draft-mtp --spec-draft-n-max 2".split(),
                           tool="server")
    ses = Session(g4, [], placement=Placement.from_settings(g4, [], s), draft=assistant)
    sp = ses.speculative
    assert sp is not None and sp.n_draft == 2
    assert sp.catchup_seconds == 0.0  # the assistant reads the target's cache: no catch-up pass
    assert sp.draft_seconds > 0 and "not measured against llama-server" in sp.text()
    assert "67-108% above" in sp.text()  # what the draft-model formula measured, in the direction it went


# --------------------------------------------------------------------------- DFlash / DSpark heads


def test_dflash_drafts_the_block_in_one_pass_and_injects_k_and_v(eagle, tmp_path):
    """A draft pass is the whole block (last token + n masks) through every layer, output_norm and the target's
    lm_head over every position, one embedding row per position; no fc. The catch-up injects n + 1 target rows:
    fc, enc.output_norm and each layer's K and V projections (and K norm), nothing else. All on the host."""
    from app.speed.speculative import dflash_n_draft, dflash_passes
    from tests.factory_models.dflash import write_dflash_draft

    target = eagle[0]
    head = open_model(write_dflash_draft(tmp_path / "d.gguf", n_embd=target.params.n_embd))
    twp, hwp = _head_wp(target, "-c 4096"), _head_wp(head, "-c 4096")
    inject = ("fc.", "enc.output_norm.")
    kv = (".attn_k.weight", ".attn_v.weight", ".attn_k_norm.weight")
    layers = [t for t in head.tensors if t.name.startswith("blk.") or t.name == "output_norm.weight"]
    injected = [t for t in head.tensors if t.name.startswith(inject) or t.name.endswith(kv)]
    out = next(t for t in target.tensors if t.name == "output.weight")
    row = _nbytes(target, "token_embd.weight") / target.params.n_vocab
    draft, catchup = dflash_passes(head, hwp, target, twp, params(), 3, dspark=False)
    assert draft == pytest.approx(_cost(layers, 4) + _cost([out], 4) + 4 * row / (10 * GB) + OVERHEAD)
    assert catchup == pytest.approx(_cost(injected, 4) + OVERHEAD)
    assert dflash_n_draft(head, 30, dspark=False) == 15 and dflash_n_draft(head, 3, dspark=False) == 3
    spark = open_model(write_dflash_draft(tmp_path / "s.gguf", n_embd=target.params.n_embd, markov_rank=8))
    assert dflash_n_draft(spark, 30, dspark=True) == 16  # anchor-first: a full block of drafts
    with pytest.raises(ValueError):
        dflash_passes(head, hwp, target, twp, params(), 0, dspark=False)


def test_dspark_and_dflash2_tables_are_read_by_the_row(eagle, tmp_path):
    """DSpark's markov_w2 is a product per drafted position, markov_w1 a row per position; DFlash2's selector
    tables a few rows per candidate: far less than a product over the block."""
    from app.speed.speculative import dflash_passes
    from tests.factory_models.dflash import write_dflash_draft

    target = eagle[0]
    twp = _head_wp(target, "-c 4096")
    n = target.params.n_embd
    plain = open_model(write_dflash_draft(tmp_path / "p.gguf", n_embd=n))
    spark = open_model(write_dflash_draft(tmp_path / "s.gguf", n_embd=n, markov_rank=8, confidence=False))
    base, _ = dflash_passes(plain, _head_wp(plain, "-c 4096"), target, twp, params(), 3, dspark=True)
    got, _ = dflash_passes(spark, _head_wp(spark, "-c 4096"), target, twp, params(), 3, dspark=True)
    w1, w2 = (next(t for t in spark.tensors if t.name == f"markov_w{k}.weight") for k in (1, 2))
    rows = 3 * w1.nbytes / w1.shape[-1]
    assert got - base == pytest.approx(3 * _cost([w2]) + rows / (10 * GB))


def test_session_predicts_dflash_speed_with_the_type_given_or_inferred(eagle, tmp_path):
    """draft-dflash given or inferred from the file: the session's speculative figure, with what llama-server
    measured against it; draft-simple with a DFlash file gives none."""
    from app.speed.speculative import DFLASH_BOUND
    from tests.factory_models.dflash import write_dflash_draft

    target = eagle[0]
    head = open_model(write_dflash_draft(tmp_path / "d.gguf", n_embd=target.params.n_embd))
    for spec, want in (("--spec-type draft-dflash", True), ("", True), ("--spec-type draft-simple", False)):
        s = settings_from_args(f"-c 4096 -md {head.path} {spec} --spec-draft-n-max 4".split(), tool="server")
        ses = Session(target, [], placement=Placement.from_settings(target, [], s), draft=head)
        sp = ses.speculative
        assert (sp is not None) is want, spec
        if sp is not None:
            assert sp.n_draft == 4 and sp.catchup_seconds > 0 and sp.draft_seconds > 0
            assert sp.step_seconds == pytest.approx(sp.draft_seconds + sp.verify_seconds + sp.catchup_seconds)
            assert sp.text().endswith(DFLASH_BOUND) and "0% to 17% above this figure" in sp.text()


def test_dsv4_dspark_heads_read_the_experts_their_block_touches(tmp_path):
    """A DeepSeek-V4 DSpark head's stages are MoE: a draft pass reads each routed expert tensor for the share of
    experts the block's tokens touch (each token n_expert_used of n_expert) and runs each token's own experts'
    elements, the rest as any layer; the injection reads fc, enc.output_norm and each stage's one K row (attn_kv,
    its norm), nothing else. The session says the figure was not measured with such a head."""
    from app.speed.speculative import DSV4_DSPARK_BOUND, dflash_passes
    from tests.factory_models.dflash import write_dflash_draft

    target = open_model(gf.write_tiny_model("deepseek4", tmp_path / "t.gguf"))
    head = open_model(write_dflash_draft(tmp_path / "h.gguf", n_embd=64, markov_rank=8, confidence=False, dsv4={}))
    twp, hwp = _head_wp(target, "-c 4096"), _head_wp(head, "-c 4096")
    hp, n_block = head.params, 4  # 3 drafted, anchor-first: 3 tokens; plain DFlash: the last token + 3 masks
    frac = hp.n_expert_used / hp.n_expert
    touched = hp.n_expert * (1 - (1 - frac) ** n_block) / hp.n_expert_used
    assert 1 < touched < hp.n_expert / hp.n_expert_used  # a share, not every expert
    skip = ("fc.", "enc.output_norm.", "markov_", "output.weight", "token_embd.weight")
    exps = [t for t in head.tensors if "_exps." in t.name]
    rest = [t for t in head.tensors if "_exps." not in t.name and not t.name.startswith(skip)]
    experts = sum(t.nbytes * frac * touched / (10 * GB) + n_block * t.n_elements * frac / 16e9 for t in exps)
    w2 = next(t for t in head.tensors if t.name == "markov_w2.weight")
    w1 = next(t for t in head.tensors if t.name == "markov_w1.weight")
    out = next(t for t in target.tensors if t.name == "output.weight")
    row = _nbytes(target, "token_embd.weight") / target.params.n_vocab
    draft, catchup = dflash_passes(head, hwp, target, twp, params(), 3, dspark=False)
    want = (
        _cost(rest, n_block) + experts + _cost([out], n_block) + 3 * _cost([w2]) + 3 * w1.nbytes / w1.shape[-1] / (10 * GB)
        + n_block * row / (10 * GB) + OVERHEAD
    )
    assert draft == pytest.approx(want)
    injected = [t for t in head.tensors if t.name.startswith(("fc.", "enc.output_norm."))
                or t.name.endswith((".attn_kv.weight", ".attn_kv_a_norm.weight"))]
    assert len(injected) == 2 + 2 * hp.n_layer
    assert catchup == pytest.approx(_cost(injected, n_block) + OVERHEAD)
    s = settings_from_args(f"-c 4096 -md {head.path} --spec-type draft-dspark --spec-draft-n-max 3".split(),
                           tool="server")
    sp = Session(target, [], placement=Placement.from_settings(target, [], s), draft=head).speculative
    assert sp is not None and sp.text().endswith(DSV4_DSPARK_BOUND)
