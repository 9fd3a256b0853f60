"""DFlash and DSpark speculative decoding (``--spec-type draft-dflash`` / ``draft-dspark`` ``-md head.gguf``): the
head's context and the target context's extra reserve, against what the real llama-server allocates.

``common_speculative_init_result`` creates the head's context as any draft's (the target's cells, the draft's
cache types, ``ctx_other`` = the target context); ``common_speculative_impl_draft_dflash`` then turns on the
extraction of the target's layer inputs (the target reserves again at the first decode) and attaches a top-k
backend sampler per slot to the head's context (which reserves again). The head's context is non-causal and keeps
an output row per token (``n_outputs_max`` = n_batch). Without ``--spec-type`` llama.cpp infers the type from the
file (``common_speculative_types_from_gguf``), and so does the estimate."""

from __future__ import annotations

import os

import pytest

from app.command.parse import settings_from_args
from app.devices.detect import detect
from app.memory.device_adapter import from_detected
from app.memory.draft import detected_spec_types, spec_type_of
from app.memory.estimator import estimate
from app.memory.kv import SettingsError
from app.model import open_model
from tests import gguf_factory as gf
from tests.factory_models.dflash import dflash_spec, write_dflash_draft
from tests.llama_fixtures import VULKAN_ENV

from .accuracy import list_rpc_devices, record, server_refusal
from .test_eagle3 import compare_with_server

#: a DFlash head shaped as z-lab's Qwen3-4B-DFlash-b16 over its sparse full-size target: five layers of the
#: target's width reading five target layers, the target's token embeddings and (tied) lm_head
QWEN3_4B_DFLASH = dict(
    target="sparse:qwen3-4b",
    target_layers=(2, 10, 18, 26, 34),
    n_layer=5,
    n_embd=2560,
    n_head=32,
    n_head_kv=8,
    head_dim=128,
    n_ff=9728,
    n_vocab=151936,
    n_ctx_train=40960,
    quant="f16",
)

#: (head options, RPC devices, arguments): on the CPU with the target's embeddings and lm_head; its own of both;
#: over two devices; pinned to one device with its own cache types; no backend sampling; a d2t vocabulary; DSpark
#: heads with -ub small enough that the reserve's blocks fit the trained block size (the Markov head is in the
#: reserved graph: 64 tokens / 4 slots = 16), with and without the confidence head, anchor-first or not; the
#: type inferred from the file; a qwen3moe target; full size
CASES = [
    (dict(), 0, "-c 4096"),
    (dict(own_embd=True, own_output=True), 0, "-c 4096 -np 2"),
    (dict(own_embd=True), 2, "-c 4096 -ngl all -ngld all -ts 1,1 -fa on"),
    (
        dict(n_layer=3, n_head=2, n_head_kv=2),
        1,
        "-c 8192 -ngl all -devd RPC0 -ngld all -np 2 -ctkd q8_0 -ctvd q8_0 -fa on",
    ),
    (dict(), 1, "-c 4096 -ngl 2 -ngld 0 -ub 256 --no-spec-draft-backend-sampling"),
    (dict(own_output=True, d2t=128), 1, "-c 4096 -ngl all -ngld all"),
    (dict(markov_rank=32), 0, "-c 4096 -np 4 -ub 64"),
    (dict(markov_rank=32, confidence=False, sample_from_anchor=False), 1, "-c 4096 -np 4 -ub 64 -ngl all -ngld all"),
    (dict(markov_rank=16, own_output=True, d2t=160), 0, "-c 2048 -np 2 -ub 32"),
    (dict(markov_rank=32, infer=True), 0, "-c 4096"),
    (dict(infer=True), 2, "-c 4096 -ngl all -ngld all -ts 2,1"),
    (dict(target="qwen3moe"), 2, "-c 4096 -ngl all -ngld all -ts 2,1 -fa on"),
    # a head without attn_v: V is K's projection, RMS-normed without a weight
    (dict(shared_kv=True), 1, "-c 4096 -ngl all -ngld all"),
    # DFlash2 heads (dynamic convolutions, candidate selector; no backend sampler): the reserve's blocks past the
    # block size and within it (64 / 4 = 16 positions), a d2t vocabulary with a logit scale, over devices
    (dict(selector=(4, 16, 8, 4)), 0, "-c 4096"),
    (dict(selector=(4, 16, 8, 4), own_embd=True), 0, "-c 4096 -np 4 -ub 64"),
    (
        dict(selector=(3, 8, 16, 6), own_output=True, d2t=200, logit_scale=0.5),
        2,
        "-c 4096 -ngl all -ngld all -np 2 -ub 32",
    ),
    # DeepSeek-V4 DSpark heads (hyper-connected q-LoRA attention over a K-only window, sqrt-softplus MoE and a
    # shared expert per stage) over a deepseek4 target: the Markov head in the reserve, the head's own embeddings
    # and lm_head over two devices, a head without a Markov head (draft-dflash) partly offloaded with q8_0 caches
    (dict(target="deepseek4", markov_rank=16, dsv4={}), 0, "-c 4096 -np 4 -ub 64"),
    (
        dict(target="deepseek4", markov_rank=16, dsv4={}, own_embd=True, own_output=True),
        2,
        "-c 4096 -ngl all -ngld all -ts 1,1",
    ),
    (
        dict(target="deepseek4", dsv4=dict(n_swa=128, n_expert=16, n_expert_used=4)),
        1,
        "-c 4096 -ngl 2 -ngld all -ctkd q8_0 -ctvd q8_0 -fa on",
    ),
    (QWEN3_4B_DFLASH, 0, "-c 8192"),
    (QWEN3_4B_DFLASH, 1, "-c 16384 -ngl 30 -ngld all -np 2 -ctkd q8_0 -ctvd q8_0 -fa on"),
]


def _tag(head: dict) -> str:
    return "-".join(
        x
        for x, on in (
            ("dspark" if head.get("markov_rank") else "dflash2" if head.get("selector") else "dflash", True),
            ("dsv4", head.get("dsv4") is not None),
            ("own-embd", head.get("own_embd")),
            ("own-output", head.get("own_output")),
            (f"d2t{head.get('d2t')}", head.get("d2t")),
            ("no-conf", head.get("markov_rank") and head.get("confidence") is False),
            ("bonus-anchor", head.get("sample_from_anchor") is False),
            ("inferred", head.get("infer")),
            ("shared-kv", head.get("shared_kv")),
        )
        if on
    )


@pytest.mark.llama
@pytest.mark.parametrize("head,n_rpc,args", CASES, ids=[f"case{i}-{c[1]}rpc" for i, c in enumerate(CASES)])
def test_dflash_buffers_match_llama_server(
    head, n_rpc, args, llama_bin, rpc_servers, llama_server, sparse_models, tmp_path
):
    """Both contexts' buffers against llama-server's -lv 4 log, every device buffer to the log's two decimals; the
    server drafts with the head (its statistics line)."""
    servers = rpc_servers(n_rpc) if n_rpc else []
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    head = dict(head)
    arch = head.pop("target", "llama")
    infer = head.pop("infer", False)
    if arch.startswith("sparse:"):
        name = arch[7:]
        arch, _hp = gf.SPARSE_SPECS[name]
        target = sparse_models[name]
        draft = write_dflash_draft(tmp_path / "head.gguf", sparse=True, **head)
    else:
        target = gf.write_tiny_model(arch, tmp_path / "t.gguf")
        draft = write_dflash_draft(tmp_path / "head.gguf", n_embd=gf.tiny_hparams(arch)["n_embd"], **head)
    spec_type = "draft-dspark" if head.get("markov_rank") else "draft-dflash"
    spec = f"-md {draft} {'' if infer else '--spec-type ' + spec_type} {args}".split()
    misses = compare_with_server(target, draft, spec, endpoints, devices, llama_server, spec_type)
    record(
        "server-log",
        case=f"dflash-{arch}-{n_rpc}rpc-{args.split()[1]}-{_tag(head)}",
        arch="dflash",
        backends=["CPU"] + (["RPC"] if n_rpc else []),
        ok=not misses,
        features=["dflash"],
    )
    assert not misses, "\n".join(misses)


@pytest.mark.llama
@pytest.mark.parametrize(
    "head,args",
    [
        (dict(), "-c 4096 -ngl all -ngld all"),
        (dict(markov_rank=32, own_embd=True), "-c 8192 -ngl 3 -ngld 1 -np 4 -ub 64"),
        (dict(selector=(4, 16, 8, 4), own_output=True, d2t=200), "-c 4096 -ngl all -ngld all -np 2 -ub 32"),
        # DeepSeek-V4 DSpark heads, the Markov head in the reserve (64 tokens, 4 slots): over a llama target, and
        # over a deepseek4 target keeping 3 recurrent-state snapshots (--no-warmup: its warm-up run segfaults
        # inside lavapipe then)
        (dict(markov_rank=16, dsv4={}), "-c 4096 -ngl all -ngld all -np 4 -ub 64"),
        (dict(target="deepseek4", markov_rank=16, dsv4={}), "-c 4096 -ngl all -ngld all -np 4 -ub 64 --no-warmup"),
    ],
    ids=["dflash", "dspark", "dflash2", "dsv4-dspark", "dsv4-dspark-dsv4-target"],
)
def test_dflash_buffers_on_vulkan0(head, args, llama_vulkan_bin, vulkan_llama_server, tmp_path):
    """The same on lavapipe's Vulkan0 (its host buffers are Vulkan_Host): both contexts' weights, caches, compute
    and output buffers. The pinned Vulkan build segfaults inside lavapipe (libvulkan_lvp.so) at the first draft
    in most runs, with EAGLE-3 heads too and never without a draft head; every buffer compared is logged before."""
    result = detect(llama_vulkan_bin, rpc=[], env={**os.environ, **VULKAN_ENV}, cuda_probe=None, amd=False)
    lanes = from_detected(result.devices)
    head = dict(head)
    target = gf.write_tiny_model(head.pop("target", "llama"), tmp_path / "t.gguf")
    draft = write_dflash_draft(tmp_path / "head.gguf", **head)
    spec_type = "draft-dspark" if head.get("markov_rank") else "draft-dflash"
    spec = f"-md {draft} --spec-type {spec_type} {args}".split()
    misses = compare_with_server(target, draft, spec, [], lanes, vulkan_llama_server, spec_type, may_crash=True)
    record(
        "vulkan",
        case=f"dflash-vk-{_tag(head)}-{args.replace(' ', '')}",
        arch="dflash",
        backends=["Vulkan"],
        ok=not misses,
        features=["dflash"],
    )
    assert not misses, "\n".join(misses)


def test_the_head_is_checked_as_llama_cpp_checks_it(tmp_path):
    """The target context's extra reserve is counted with the type (given or inferred) and the head open; a head
    reading a layer the target lacks, or the last layer's output a llama-style target never extracts, is refused
    with llama.cpp's reason; a long target-layer array (read lazily from the file) is read all the same."""
    target = open_model(gf.write_tiny_model("llama", tmp_path / "t.gguf"))
    head = write_dflash_draft(tmp_path / "head.gguf")
    args = {
        t: settings_from_args(f"-md {head} {t}".split(), tool="server")
        for t in ("--spec-type=draft-simple", "--spec-type=draft-dflash", "-c=4096")
    }
    got = {t: estimate(target, [], s, draft=open_model(head)) for t, s in args.items()}
    plain, dflash, inferred = got.values()
    assert dflash.host.compute > plain.host.compute  # three layer inputs kept as outputs
    assert inferred.host.compute == dflash.host.compute
    note = next(n for n in dflash.notes if n.startswith("DFlash head"))
    assert "layers 1, 2, 3" in note and "1.50 MiB" in note
    assert any("infers draft-dflash" in n for n in inferred.notes)
    assert not any("infers" in n for n in dflash.notes + plain.notes)
    for ids, why in (((1, 2, 5), "reads target layer 5, the model has 4"), ((1, 2, 4), "layer input tensor is null")):
        far = write_dflash_draft(tmp_path / f"far{ids[-1]}.gguf", target_layers=ids)
        with pytest.raises(SettingsError, match=why):
            estimate(
                target,
                [],
                settings_from_args(f"-md {far} --spec-type draft-dflash".split(), tool="server"),
                draft=open_model(far),
            )
    many = write_dflash_draft(tmp_path / "many.gguf", target_layers=(1,) * 5000, sparse=True)
    est = estimate(target, [], settings_from_args(f"-md {many} -c 4096".split(), tool="server"), draft=open_model(many))
    assert any(n.startswith("DFlash head") and "layers 1, 1, 1" in n for n in est.notes)
    spark = write_dflash_draft(tmp_path / "spark.gguf", markov_rank=8)
    assert spec_type_of(open_model(spark)) == "draft-dspark"
    assert detected_spec_types(open_model(spark)) == ["draft-dspark"]
    assert detected_spec_types(open_model(head)) == ["draft-dflash"]
    assert detected_spec_types(target) == []


def test_hostile_float_keys_are_refused_as_llama_cpp_refuses_them(tmp_path):
    """llama.cpp reads the DFlash float keys with get_key into a float: another type stops the load."""
    from app.model.errors import MetadataError

    s = dflash_spec()
    s.set("{arch}.final_logit_softcapping", "30")
    with pytest.raises(MetadataError, match="final_logit_softcapping"):
        open_model(gf.write_spec(s, tmp_path / "bad.gguf"))


#: a DeepSeek-V4 DSpark head's keys as llama.cpp refuses them (load_arch_hparams' DSV4 branch): a plain head
#: marked hyper-connected lacks the stage keys, another scoring, a compressed stage, a window of 0 (asserted)
DSV4_REFUSALS = [
    (dict(markov_rank=8), {"{arch}.hyper_connection.count": 4}, "key not found in model: dflash.attention.q_lora_rank"),
    (dict(markov_rank=8, dsv4={}), {"{arch}.expert_gating_func": 1}, "expects sqrtsoftplus MoE scoring"),
    (dict(dsv4={}), {"{arch}.attention.compress_ratios": [0, 4]}, "expects uncompressed attention on all stages"),
    (dict(dsv4={}), {"{arch}.attention.sliding_window": 0}, "n_swa > 0"),
]
#: the key each refusal names (the first: the first stage key llama.cpp looks for)
DSV4_NAMED = [
    "dflash.attention.q_lora_rank",
    "dflash.expert_gating_func",
    "dflash.attention.compress_ratios",
    "dflash.attention.sliding_window",
]


@pytest.mark.llama
@pytest.mark.parametrize(
    "head,keys,why,named",
    [(*r, n) for r, n in zip(DSV4_REFUSALS, DSV4_NAMED)],
    ids=["no-stage-keys", "scoring", "compressed", "no-window"],
)
def test_dsv4_heads_llama_cpp_refuses_are_refused(head, keys, why, named, llama_bin, tmp_path):
    """llama-server stops on each (its words in its log, or an abort); the head does not open in Layerdeck, with
    llama.cpp's words and the key named."""
    from app.model.errors import MetadataError

    s = dflash_spec(**head)
    for key, value in keys.items():
        s.set(key, value)
    path = gf.write_spec(s, tmp_path / "head.gguf")
    target = gf.write_tiny_model("llama", tmp_path / "t.gguf")
    said = server_refusal(llama_bin, target, ["-md", str(path), "--spec-type", "draft-dflash", "-c", "4096"])
    assert why in said, said[-2000:]
    with pytest.raises(MetadataError) as err:
        open_model(path)
    assert why in str(err.value) and named in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "change,why",
    [
        (dict(selector=(4, 16, 8, 4), drop="{arch}.selector_rank"), "missing conv/selector metadata"),
        (dict(selector=(4, 24, 8, 4)), "divisible by conv_group_size"),
        (dict(selector=(4, 16, 8, 8)), "too small for the selector lattice"),
        (dict(markov_rank=8, drop="{arch}.block_size"), "requires 'dflash.block_size'"),
    ],
)
def test_heads_llama_cpp_refuses_are_refused(change, why, tmp_path):
    """load_arch_tensors' DFlash2 checks (64 wide: groups of 24 do not divide it, a top-8 lattice needs 72) and
    the DSpark graph's block size, with llama.cpp's words."""
    change = dict(change)
    drop = change.pop("drop", None)
    s = dflash_spec(**change)
    if drop:
        del s.kv[drop.replace("{arch}", "dflash")]
    path = gf.write_spec(s, tmp_path / "head.gguf")
    target = open_model(gf.write_tiny_model("llama", tmp_path / "t.gguf"))
    with pytest.raises(SettingsError, match=why):
        estimate(target, [], settings_from_args(f"-md {path} -c 4096".split(), tool="server"), draft=open_model(path))


def test_the_head_is_written_as_llama_cpp_reads_it():
    """load_arch_tensors' shapes: fc over the target layers at the draft's width, the Markov head over the draft
    vocabulary, the confidence head over the hidden state and the Markov rank."""
    s = dflash_spec(n_embd=64, target_layers=(1, 2, 3, 4), markov_rank=8, d2t=100, own_output=True)
    assert s.tensor("fc.weight").shape == (256, 64)
    assert s.tensor("markov_w1.weight").shape == (8, gf._n_vocab(s.hparams))
    assert s.tensor("markov_w2.weight").shape == (8, 100)
    assert s.tensor("output.weight").shape == (64, 100)
    assert s.tensor("conf_proj.weight").shape == (72, 1)
    assert s.kv["dflash.target_layers"][0] == [1, 2, 3, 4] and s.n_layer == 2
    assert s.kv["tokenizer.ggml.mask_token_id"][0] == 3
