"""EAGLE-3 speculative decoding (``--spec-type draft-eagle3 -md head.gguf``): the head's context and the target
context's extra reserve, against what the real llama-server allocates.

``common_speculative_init_result`` creates the head's context as any draft's (the target's cells, the draft's
cache types, ``ctx_other`` = the target context); ``common_speculative_impl_draft_eagle3`` then turns on the
extraction of the target's layer inputs (``llama_set_embeddings_layer_inp``: the target reserves its graph again at
the first decode, those tensors being outputs) and attaches a top-k backend sampler per slot to the head's context
(which reserves again). The load log holds, in order: the target's buffers, 'loading draft model', the head's
buffers and first reserve, 'adding speculative implementation', the head's second reserve, and after the first
request the target's second reserve."""

from __future__ import annotations

import os
import re

import pytest

from app.command.parse import settings_from_args
from app.devices.detect import detect
from app.memory.device_adapter import from_detected
from app.memory.estimator import estimate
from app.memory.kv import SettingsError
from app.model import open_model
from tests import gguf_factory as gf
from tests.factory_models.eagle3 import eagle3_spec, write_eagle3_draft
from tests.llama_fixtures import VULKAN_ENV

from .accuracy import COMPUTE_SLACK, MiB, list_rpc_devices, record, server_refusal

#: DeepSeek-V4's compressor states ("DSV4 csa state buffer size") are part of its KV cache
_BUF = re.compile(r"(\S+)\s+(model|KV|compute|output|DSV4 \w+ state) buffer size =\s*([\d.]+) MiB")

# keep the generated text to valid UTF-8: ban <unk>/<s>/</s> and the byte tokens 0x80..0xFF
_BANNED = [[i, False] for i in (0, 1, 2, *range(3 + 0x80, 3 + 0x100))]


def _logged(text: str) -> dict[tuple[str, str], tuple[float, int]]:
    """(buffer type, kind) -> (MiB, lines): weights, KV and output summed over their lines, compute the largest
    of its reserves (a backend's compute buffer only grows)."""
    out: dict[tuple[str, str], tuple[float, int]] = {}
    for buft, kind, mib in _BUF.findall(text):
        kind = "KV" if kind.startswith("DSV4") else kind
        total, n = out.get((buft, kind), (0.0, 0))
        out[(buft, kind)] = (max(total, float(mib)), 1) if kind == "compute" else (total + float(mib), n + 1)
    return out


def _parts(text: str, spec_type: str = "draft-eagle3") -> tuple[dict, dict]:
    """The target's buffers (its load, and its reserve at the first decode) and the head's."""
    cut = text.find("loading draft model")
    up = text.find("listening on")
    assert 0 < cut < up, text[-3000:]
    assert f"adding speculative implementation '{spec_type}'" in text[cut:up], text[cut:up][-3000:]
    main = _logged(text[:cut])
    for key, (mib, _) in _logged(text[up:]).items():  # the target's second reserve, after the first request
        assert key[1] == "compute", key
        main[key] = (max(main.get(key, (0.0, 1))[0], mib), 1)
    return main, _logged(text[cut:up])


def compare_with_server(target, draft, spec, endpoints, devices, llama_server, spec_type, may_crash=False) -> list[str]:
    """Run llama-server with the draft head (``spec``: its arguments), answer one request, and compare both
    contexts' buffers with its -lv 4 log, every device buffer to the log's two decimals; the server must have
    drafted with ``spec_type`` (its statistics line). ``may_crash``: the server may die during the request (the
    pinned Vulkan build on lavapipe segfaults inside the driver at a head's first draft, now and then), provided
    the target's reserve at the first request was logged before: the figures compared are all logged by then.
    Returns the misses."""
    extra = (["--rpc", ",".join(endpoints)] if endpoints else []) + spec
    srv = llama_server(target, *extra, "--fit", "off", "--no-repack", "-lv", "4", timeout=180)
    request = {
        "prompt": "Hello world",
        "n_predict": 8,
        "temperature": 0,
        "ignore_eos": True,
        "logit_bias": _BANNED,
        "cache_prompt": False,
    }
    try:
        status, body = srv.request("/completion", request)
        crashed = False
    except OSError:  # the connection reset or closed by a server that died
        if not may_crash:
            raise
        crashed = True
    srv.stop()
    text = srv.output()
    if crashed:
        after = text[text.find("listening on") :]
        assert "compute buffer size" in after, after[-3000:]  # the first request's reserve came before the crash
    else:
        assert status == 200 and body["tokens_predicted"] == 8, body
        assert f"statistics     {spec_type}" in text or "draft acceptance" in text, text[-2000:]
    main_logged, draft_logged = _parts(text, spec_type)
    est = estimate(open_model(target), devices, settings_from_args(spec, tool="server"), draft=open_model(draft))
    assert est.draft is not None
    assert not [n for n in est.draft.notes if "approximate" in n], est.draft.notes
    by_buft = {d.buft: d.name for d in devices}
    misses = []
    for part, logged, ours_est in (("main", main_logged, est), ("draft", draft_logged, est.draft)):
        assert logged, part
        for (buft, kind), (mib, lines) in logged.items():
            dev = ours_est.device(by_buft.get(buft, "CPU"))
            ours = {"model": dev.model, "KV": dev.kv, "compute": dev.compute, "output": dev.output}[kind] / MiB
            tol = (
                max(0.01 * mib, 16)
                if kind == "model" and buft not in by_buft
                else (0.005 * lines + 1e-9 + (COMPUTE_SLACK / MiB if kind == "compute" else 0.0))
            )
            if abs(ours - mib) > tol:
                misses.append(f"{part} {buft} {kind}: ours {ours:.4f} MiB, llama-server logged {mib:.2f} MiB")
    for d in est.devices:
        mine = next((x for x in est.draft.devices if x.name == d.name), None)
        assert d.draft == (mine.total if mine else 0)
    return misses


#: a head of Qwen3-4B's width and vocabulary over its sparse full-size target
QWEN3_4B_HEAD = dict(
    target="sparse:qwen3-4b",
    own_embd=True,
    target_layers=(2, 18, 33),
    n_embd=2560,
    n_head=32,
    n_head_kv=8,
    head_dim=128,
    n_ff=9728,
    n_vocab=151936,
    n_ctx_train=40960,
    quant="f16",
)

#: a head shaped as the published EAGLE-3 heads of Llama-3.1-8B-Instruct: one layer of the target's width, an
#: lm_head over 32,000 tokens with d2t, no token_embd
LLAMA31_8B_HEAD = dict(
    target="sparse:llama-3.1-8b",
    target_layers=(2, 16, 29),
    n_embd=4096,
    n_head=32,
    n_head_kv=8,
    head_dim=128,
    n_ff=14336,
    n_vocab=128256,
    n_ctx_train=131072,
    d2t=32000,
    quant="f16",
)

#: (head options, RPC devices, arguments): on the CPU; every layer of both on two RPC devices; the head pinned to
#: one device with its own cache types and two slots; the head's final extract layer being the target's last
#: hidden state (``llama_set_embeddings_nextn``); the head partly offloaded, no backend sampling, -ub 256
CASES = [
    (dict(own_embd=True), 0, "-c 4096"),
    (dict(own_embd=True), 2, "-c 4096 -ngl all -ngld all -ts 1,1 -fa on"),
    (
        dict(own_embd=True, n_embd=128, n_head=4, n_head_kv=4),
        1,
        "-c 8192 -ngl all -devd RPC0 -ngld all -np 2 -ctkd q8_0 -ctvd q8_0 -fa on --spec-draft-n-max 5",
    ),
    (dict(own_embd=True, target_layers=(0, 2, 4)), 0, "-c 2048 -np 1"),
    (dict(own_embd=True, norm_before_fc=True), 1, "-c 4096 -ngl 2 -ngld 0 -ub 256 --no-spec-draft-backend-sampling"),
    # other targets of the llama-style graph: a MoE over two devices, qwen3 with -ub 1024 and a wider head
    (dict(own_embd=True, target="qwen3moe"), 2, "-c 4096 -ngl all -ngld all -ts 2,1 -fa on"),
    (dict(own_embd=True, target="qwen3", n_embd=96, n_ff=256), 0, "-c 4096 -b 1024 -ub 1024 -np 2"),
    # full size (sparse files): Qwen3-4B with a head of its width and vocabulary (the backend sampler's reserve,
    # padding the logits of every token, doubles the head's compute: 306.75 -> 604.08 MiB)
    (QWEN3_4B_HEAD, 0, "-c 8192"),
    (QWEN3_4B_HEAD, 1, "-c 16384 -ngl 30 -ngld all -np 2 -ctkd q8_0 -ctvd q8_0 -fa on"),
    # heads as most are published: no token_embd (the decoder reads the target's, cparams.ctx_other), on the CPU
    # and over two devices; no output either (the target's lm_head, on its output layer's device); a smaller
    # vocabulary mapped onto the target's by d2t (ggml_fill + set_rows)
    (dict(), 0, "-c 4096"),
    (dict(), 2, "-c 4096 -ngl all -ngld all -ts 1,1 -fa on"),
    (dict(own_output=False), 1, "-c 4096 -ngl all -ngld all -np 2"),
    (dict(d2t=128), 1, "-c 4096 -ngl 2 -ngld all -fa on"),
    (dict(d2t=96, own_output=True), 0, "-c 2048 -np 2 --no-spec-draft-backend-sampling"),
    # full size: Llama-3.1-8B with a head shaped as the published EAGLE-3 heads for it (their own lm_head over a
    # 32k vocabulary with d2t, the target's token embeddings)
    (LLAMA31_8B_HEAD, 1, "-c 8192 -ngl all -ngld all"),
]


def _head_tag(head: dict) -> str:
    """What the head borrows from the target and whether it maps its vocabulary (for the coverage rows)."""
    return "-".join(
        x
        for x, on in (
            ("own-embd", head.get("own_embd")),
            ("target-embd", not head.get("own_embd")),
            ("target-output", head.get("own_output") is False),
            (f"d2t{head.get('d2t')}", head.get("d2t")),
        )
        if on
    )


@pytest.mark.llama
@pytest.mark.parametrize("head,n_rpc,args", CASES, ids=[f"case{i}-{c[1]}rpc" for i, c in enumerate(CASES)])
def test_eagle3_buffers_match_llama_server(
    head, n_rpc, args, llama_bin, rpc_servers, llama_server, sparse_models, tmp_path
):
    """Both contexts' buffers against llama-server's -lv 4 log, every device buffer to the log's two decimals; the
    server drafts with the head (its statistics line)."""
    servers = rpc_servers(n_rpc) if n_rpc else []
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    head = dict(head)
    arch = head.pop("target", "llama")
    if arch.startswith("sparse:"):
        name = arch[7:]
        arch, hp = gf.SPARSE_SPECS[name]
        target = sparse_models[name]
        draft = write_eagle3_draft(tmp_path / "head.gguf", n_embd_tgt=hp["n_embd"], sparse=True, **head)
    else:
        target = gf.write_tiny_model(arch, tmp_path / "t.gguf")
        draft = write_eagle3_draft(tmp_path / "head.gguf", n_embd_tgt=gf.tiny_hparams(arch)["n_embd"], **head)
    spec = f"-md {draft} --spec-type draft-eagle3 {args}".split()
    misses = compare_with_server(target, draft, spec, endpoints, devices, llama_server, "draft-eagle3")
    record(
        "server-log",
        case=f"eagle3-{arch}-{n_rpc}rpc-{args.split()[1]}-{_head_tag(head)}",
        arch="eagle3",
        backends=["CPU"] + (["RPC"] if n_rpc else []),
        ok=not misses,
        features=["eagle3"],
    )
    assert not misses, "\n".join(misses)


@pytest.mark.llama
@pytest.mark.parametrize(
    "head,args",
    [
        (dict(own_embd=True), "-c 4096 -ngl all -ngld all"),
        (dict(d2t=128), "-c 4096 -ngl 3 -ngld all -np 2 -ub 64 -fa on"),
    ],
    ids=["own-embd", "d2t-partial"],
)
def test_eagle3_buffers_on_vulkan0(head, args, llama_vulkan_bin, vulkan_llama_server, tmp_path):
    """The same on lavapipe's Vulkan0 (its host buffers are Vulkan_Host): both contexts' weights, caches, compute
    and output buffers, the head whole on Vulkan0 and a target split with the CPU. The pinned Vulkan build may
    segfault inside lavapipe at the head's first draft; every buffer compared is logged before."""
    result = detect(llama_vulkan_bin, rpc=[], env={**os.environ, **VULKAN_ENV}, cuda_probe=None, amd=False)
    lanes = from_detected(result.devices)
    target = gf.write_tiny_model("llama", tmp_path / "t.gguf")
    draft = write_eagle3_draft(tmp_path / "head.gguf", n_embd_tgt=gf.tiny_hparams("llama")["n_embd"], **head)
    spec = f"-md {draft} --spec-type draft-eagle3 {args}".split()
    misses = compare_with_server(target, draft, spec, [], lanes, vulkan_llama_server, "draft-eagle3", may_crash=True)
    record(
        "vulkan",
        case=f"eagle3-vk-{_head_tag(head)}-{args.replace(' ', '')}",
        arch="eagle3",
        backends=["Vulkan"],
        ok=not misses,
        features=["eagle3"],
    )
    assert not misses, "\n".join(misses)


@pytest.mark.llama
def test_draft_cache_types_the_head_cannot_hold_are_refused_as_llama_cpp_refuses_them(llama_bin, tmp_path):
    """-ctkd q8_0 on a head of 16-wide heads: llama-server stops ("K cache type q8_0 with block size 32 does not
    divide n_embd_head_k=16", "failed to create MTP context"); the estimate stops with that reason, naming the
    draft and its own flag (-ctkd, not the main model's -ctk); f16 draft caches give figures."""
    target = gf.write_tiny_model("llama", tmp_path / "t.gguf")
    draft = write_eagle3_draft(tmp_path / "head.gguf", n_embd_tgt=gf.tiny_hparams("llama")["n_embd"], d2t=128)
    spec = f"-md {draft} --spec-type draft-eagle3 -c 4096 -ctkd q8_0 -ctvd q8_0 -fa on".split()
    said = server_refusal(llama_bin, target, spec)
    assert "K cache type q8_0 with block size 32 does not divide n_embd_head_k=16" in said
    with pytest.raises(SettingsError) as err:
        estimate(open_model(target), [], settings_from_args(spec, tool="server"), draft=open_model(draft))
    msg = str(err.value)
    assert msg.startswith("the draft model head.gguf (-md): -ctkd q8_0:"), msg
    assert "does not divide n_embd_head_k=16" in msg and "use -ctkd f16" in msg and "-ctk " not in msg, msg
    spec[spec.index("q8_0")] = "f16"
    spec[spec.index("q8_0")] = "f16"
    est = estimate(open_model(target), [], settings_from_args(spec, tool="server"), draft=open_model(draft))
    assert est.draft is not None and est.draft.host.kv > 0


@pytest.mark.llama
def test_a_head_reading_a_tensor_its_devices_cannot_reach_stops_llama_cpp(llama_bin, rpc_servers, tmp_path):
    """A head without output.weight reads the target's lm_head (cparams.ctx_other) in the target's buffer; with the
    target on RPC0 and the head on RPC1 (-devd) no backend of the head's context reads that buffer, and
    llama-server aborts ("pre-allocated tensor (output.weight) in a buffer (RPC0[...]) that cannot run the
    operation"). The estimate says so, rather than give figures; with the head on RPC0 it gives them."""
    from app.memory.backends import BackendAbort

    servers = rpc_servers(2)
    endpoints = [s.endpoint for s in servers]
    devices = list_rpc_devices(llama_bin / "llama-server", endpoints)
    target = gf.write_tiny_model("llama", tmp_path / "t.gguf")
    draft = write_eagle3_draft(tmp_path / "head.gguf", n_embd_tgt=gf.tiny_hparams("llama")["n_embd"], own_output=False)
    spec = f"-dev RPC0 -ngl all -md {draft} -devd RPC1 -ngld all --spec-type draft-eagle3 -c 4096".split()
    said = server_refusal(llama_bin, target, spec, endpoints)
    assert "pre-allocated tensor (output.weight) in a buffer (RPC0" in said
    with pytest.raises(BackendAbort, match=r"pre-allocated tensor \(output.weight\) in a buffer \(RPC0\)"):
        estimate(open_model(target), devices, settings_from_args(spec, tool="server"), draft=open_model(draft))
    ok = [a if a != "RPC1" else "RPC0" for a in spec]
    est = estimate(open_model(target), devices, settings_from_args(ok, tool="server"), draft=open_model(draft))
    assert est.draft is not None and not [n for n in est.draft.notes if "approximate" in n]


def test_the_head_is_checked_as_llama_cpp_checks_it(tmp_path):
    """common_speculative_impl_draft_eagle3 refuses a draft that is not an EAGLE-3 head; the target context's
    extra reserve is counted only with the type and the head open; notes say what grows at run time."""
    target = open_model(gf.write_tiny_model("llama", tmp_path / "t.gguf"))
    other = gf.write_tiny_model("llama", tmp_path / "other.gguf", n_layer=1)
    with pytest.raises(SettingsError, match="draft model is not eagle3"):
        estimate(
            target,
            [],
            settings_from_args(f"-md {other} --spec-type draft-eagle3".split(), tool="server"),
            draft=open_model(other),
        )
    head = write_eagle3_draft(tmp_path / "head.gguf", own_embd=True)
    plain = estimate(
        target,
        [],
        settings_from_args(f"-md {head} --spec-type draft-simple".split(), tool="server"),
        draft=open_model(head),
    )
    e3 = estimate(
        target,
        [],
        settings_from_args(f"-md {head} --spec-type draft-eagle3".split(), tool="server"),
        draft=open_model(head),
    )
    assert e3.host.compute > plain.host.compute  # three layer inputs kept as outputs
    note = next(n for n in e3.notes if n.startswith("EAGLE-3 head"))
    assert "layers 1, 2, 3" in note and "1.50 MiB" in note  # 3 x 64 floats x 2048 (-b) tokens
    assert not any("not sized" in n for n in e3.notes)
    far = write_eagle3_draft(tmp_path / "far.gguf", own_embd=True, target_layers=(1, 2, 5))
    with pytest.raises(SettingsError, match="extracts target layer 5"):
        estimate(
            target,
            [],
            settings_from_args(f"-md {far} --spec-type draft-eagle3".split(), tool="server"),
            draft=open_model(far),
        )


def test_the_head_is_written_as_llama_cpp_reads_it():
    """load_arch_tensors' shapes: fc over the three target layers, q/k/v over twice the head's width."""
    s = eagle3_spec(n_embd_tgt=96, n_embd=64)
    assert s.tensor("fc.weight").shape == (288, 64)
    assert s.tensor("blk.0.attn_q.weight").shape == (128, 64)
    assert s.tensor("blk.0.attn_output.weight").shape == (64, 64)
    assert s.kv["eagle3.target_layers"][0] == [1, 2, 3] and s.n_layer == 1
    assert "token_embd.weight" not in {t.name for t in s.tensors}
