"""The GGUF test-model factory writes files that gguf-py and the real llama.cpp accept."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import time

import pytest
from gguf import GGUFReader

from tests import gguf_factory as gf
from tests.llama_fixtures import CPU_WORKAROUND_ARGS
from tests.memory.accuracy import record

MiB = 1024 * 1024


def _field(reader: GGUFReader, key: str):
    return reader.fields[key].contents()


# --------------------------------------------------------------------------- tiny models: gguf-py


@pytest.mark.parametrize("arch", gf.ARCHS)
def test_tiny_model_reads_back(arch, tiny_models):
    path = tiny_models[arch]
    spec = gf.model_spec(arch)
    reader = GGUFReader(path)
    assert _field(reader, "general.architecture") == gf.GGUF_ARCH[arch]
    assert len(reader.tensors) == len(spec.tensors)
    by_name = {t.name: t for t in reader.tensors}
    for t in spec.tensors:
        rt = by_name[t.name]
        assert tuple(int(x) for x in rt.shape) == t.shape, t.name
        assert rt.tensor_type == t.qtype, t.name
        assert int(rt.n_bytes) == t.nbytes, t.name
    assert _field(reader, f"{spec.gguf_arch}.block_count") == spec.n_layer
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == gf._n_vocab(spec.hparams)  # BASE_VOCAB but chameleon
    assert os.path.getsize(path) < 5 * MiB
    # a real mix of types, not all f16
    kinds = set(spec.qtype_counts())
    assert len(kinds) >= 3, kinds
    if any(len(t.shape) == 1 for t in spec.tensors):  # norms and biases are F32 (OLMo 1 has neither)
        assert {"F32"} < kinds, kinds


def test_tiny_models_are_deterministic(tmp_path):
    a = gf.write_tiny_model("qwen3moe", tmp_path / "a.gguf", seed=1)
    b = gf.write_tiny_model("qwen3moe", tmp_path / "b.gguf", seed=1)
    c = gf.write_tiny_model("qwen3moe", tmp_path / "c.gguf", seed=2)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_tiny_model_variations(tmp_path):
    tied = gf.write_tiny_model("llama", tmp_path / "tied.gguf", tied_embeddings=True, vocab_extra=12, n_layer=2,
                               n_head_kv=[2, 2], n_ctx_train=1024)
    r = GGUFReader(tied)
    names = {t.name for t in r.tensors}
    assert "output.weight" not in names and "token_embd.weight" in names
    assert _field(r, "llama.block_count") == 2
    assert _field(r, "llama.context_length") == 1024
    assert _field(r, "llama.attention.head_count_kv") == [2, 2]
    assert len(r.fields["tokenizer.ggml.tokens"].data) == gf.BASE_VOCAB + 12
    emb = next(t for t in r.tensors if t.name == "token_embd.weight")
    assert tuple(int(x) for x in emb.shape) == (64, gf.BASE_VOCAB + 12)

    with pytest.raises(ValueError, match="requires output.weight"):
        gf.write_tiny_model("gpt-oss", tmp_path / "x.gguf", tied_embeddings=True)
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        gf.write_tiny_model("llama", tmp_path / "x.gguf", n_experts=4)


def test_special_layouts():
    ds = gf.model_spec("deepseek2")
    assert ds.tensor("blk.1.attn_k_b.weight").shape == (32, 64, 4)   # {nope, kv_lora, n_head}
    assert ds.tensor("blk.1.attn_v_b.weight").shape == (64, 32, 4)   # {kv_lora, v_head_dim, n_head}
    assert "blk.0.ffn_gate.weight" in {t.name for t in ds.tensors}    # leading dense block
    assert ds.kv["deepseek2.attention.key_length"][0] == 64 + 16
    oss = gf.model_spec("gpt-oss")
    assert oss.tensor("blk.0.ffn_up_exps.weight").qtype.name == "MXFP4"
    assert oss.tensor("blk.0.attn_sinks.weight").shape == (4,)
    gh = gf.model_spec("granitehybrid")
    assert gh.kv["granitehybrid.attention.head_count_kv"][0] == [0, 0, 2, 0]
    glm = gf.model_spec("glm4moe")
    assert glm.n_layer == 4 and glm.kv["glm4moe.nextn_predict_layers"][0] == 1
    q35 = gf.model_spec("qwen35")  # layers 0-2 gated delta-net, 3 full attention (Q twice as wide: query + gate)
    assert q35.tensor("blk.0.attn_qkv.weight").shape == (64, 2 * 2 * 16 + 4 * 16)
    assert q35.tensor("blk.0.ssm_conv1d.weight").shape == (4, 128) and q35.tensor("blk.0.ssm_a").shape == (4,)
    assert q35.tensor("blk.3.attn_q.weight").shape == (64, 2 * 4 * 32)
    assert q35.kv["qwen35.rope.dimension_sections"][0] == [3, 3, 2, 0]
    nxt = gf.model_spec("qwen3next", ssm_in=True)
    assert nxt.tensor("blk.0.ssm_in.weight").shape == (64, 2 * 32 + 2 * 64)
    assert nxt.tensor("blk.0.ssm_ba.weight").shape == (64, 8)
    phi = gf.model_spec("phimoe", rope_factors=True)  # biases on norms, projections, output; LongRoPE n_rot / 2
    assert phi.tensor("output.bias").shape == (320,) and phi.tensor("rope_factors_long.weight").shape == (8,)
    assert phi.tensor("blk.0.attn_norm.bias").shape == (64,)
    ling = gf.model_spec("bailingmoe2")  # fused qkv (n_embd + 2 KV heads of 16 each side), + 1 NextN block
    assert ling.tensor("blk.0.attn_qkv.weight").shape == (64, 64 + 2 * 2 * 16)
    assert ling.n_layer == 4 and ling.kv["bailingmoe2.nextn_predict_layers"][0] == 1
    assert ling.tensor("blk.3.nextn.eh_proj.weight").shape == (128, 64)
    lfm = gf.model_spec("lfm2")  # short conv on layers 0, 1, 3 (head_count_kv 0), attention on 2
    assert lfm.kv["lfm2.attention.head_count_kv"][0] == [0, 0, 2, 0]
    assert lfm.tensor("blk.0.shortconv.in_proj.weight").shape == (64, 192)
    assert lfm.tensor("blk.0.shortconv.conv.weight").qtype == gf.F32
    assert "token_embd_norm.weight" in {t.name for t in lfm.tensors}


# --------------------------------------------------------------------------- tiny models: llama-server

# keep the generated text to valid UTF-8: ban <unk>/<s>/</s> and the byte tokens 0x80..0xFF
_BANNED = [[i, False] for i in (0, 1, 2, *range(3 + 0x80, 3 + 0x100))]


def _complete(server) -> dict:
    status, body = server.request("/completion", {
        "prompt": "Hello world", "n_predict": 4, "temperature": 0, "ignore_eos": True,
        "logit_bias": _BANNED, "cache_prompt": False,
    })
    assert status == 200, body
    assert isinstance(body, dict), body
    return body


#: what an architecture needs to run at all in this llama.cpp, in llama-server and llama-fit-params alike: PLM
#: aborts with flash attention (auto probes it)
_RUN_ARGS = {"plm": ("-fa", "off")}


#: the diffusion decoders (no memory, non-causal): llama-server loads them but cannot answer (they run in
#: llama-diffusion-cli), and its warmup's encode aborts on them ("GGML_ASSERT(n_outputs_max <=
#: cparams.n_outputs_max)"); their test loads them without warmup and checks the refusal
_NO_COMPLETION = {"llada", "dream", "llada-moe", "rnd1"}
#: llama-server's arguments per architecture (--no-warmup is llama-server's alone: llama-fit-params refuses it)
_SERVE_ARGS = {**_RUN_ARGS, **{a: ("--no-warmup",) for a in _NO_COMPLETION}}


@pytest.mark.llama
@pytest.mark.parametrize("arch", gf.ARCHS)
def test_tiny_model_serves_completion(arch, tiny_models, llama_server):
    server = llama_server(tiny_models[arch], "-c", "256", "-np", "1", "--fit", "off", "-ngl", "0", "-t", "2",
                          *_SERVE_ARGS.get(arch, ()))
    if arch in _NO_COMPLETION:
        status, body = server.request("/completion", {"prompt": "Hello world", "n_predict": 4})
        refused = status == 500 and "does not support logits computation" in str(body)
        record("serves", case=arch, arch=gf.GGUF_ARCH[arch], backends=["CPU"], ok=refused)
        assert refused, (status, body)
        return
    body = _complete(server)
    record("serves", case=arch, arch=gf.GGUF_ARCH[arch], backends=["CPU"],
           ok=bool(isinstance(body.get("content"), str) and body["content"] and body.get("tokens_predicted") == 4))
    assert isinstance(body["content"], str) and body["content"], body
    assert body["tokens_predicted"] == 4, body
    server.stop()
    assert server.process.returncode is not None


@pytest.mark.llama
@pytest.mark.parametrize("arch, kwargs", [
    ("llama", dict(tied_embeddings=True, n_head_kv=[2, 2, 2, 2], vocab_extra=100)),
    ("deepseek2", dict(tied_embeddings=True, n_layer=2)),
    ("gpt-oss", dict(swa_pattern=[True, False, True, False], n_ctx_train=2048)),
    ("qwen35", dict(recurrent_layers=[True, False, True, False], tied_embeddings=True)),
    ("qwen3next", dict(ssm_in=True)),
], ids=["llama-tied-kv-array", "deepseek2-tied", "gpt-oss-swa-array", "qwen35-recurrent-array-tied",
        "qwen3next-ssm-in"])
def test_tiny_variants_serve_completion(arch, kwargs, tmp_path, llama_server):
    path = gf.write_tiny_model(arch, tmp_path / f"{arch}.gguf", **kwargs)
    server = llama_server(path, "-c", "256", "-np", "1", "--fit", "off", "-ngl", "0", "-t", "2")
    assert _complete(server)["tokens_predicted"] == 4


@pytest.mark.llama
def test_tiny_model_across_two_rpc_servers(tiny_models, rpc_servers, llama_server):
    a, b = rpc_servers(2)
    server = llama_server(tiny_models["qwen3moe"], "--rpc", f"{a.endpoint},{b.endpoint}", "-ngl", "all",
                          "-c", "256", "-np", "1", "--fit", "off", "-lv", "4")
    body = _complete(server)
    assert body["tokens_predicted"] == 4
    log = server.output()
    for ep in (a.endpoint, b.endpoint):
        assert re.search(rf"RPC\d+\[{re.escape(ep)}\] model buffer size", log), log[-3000:]
        assert re.search(rf"RPC\d+\[{re.escape(ep)}\] KV buffer size", log), log[-3000:]
    assert all(s.process.poll() is None for s in (a, b))


@pytest.mark.llama
def test_rpc_server_memory_reporting(llama_bin, rpc_servers):
    """A CPU RPC server reports host RAM (free == total); memory_mib fakes it via the sysconf shim."""
    plain, faked = rpc_servers(2, memory_mib=[None, 3000])
    out = subprocess.run([str(llama_bin / "llama-server"), "--rpc", f"{plain.endpoint},{faked.endpoint}",
                          "--list-devices"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    mem = {m.group(1): (int(m.group(2)), int(m.group(3)))
           for m in re.finditer(r"RPC\d+: (\S+) \((\d+) MiB, (\d+) MiB free\)", out.stdout)}
    host_mib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // MiB
    assert mem[plain.endpoint] == (host_mib, host_mib), out.stdout
    assert mem[faked.endpoint] == (3000, 3000), out.stdout


# --------------------------------------------------------------------------- sparse models


def _header_counts(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        magic, version, n_tensors, n_kv = struct.unpack("<4sIQQ", f.read(24))
    assert magic == b"GGUF" and version == 3
    return n_tensors, n_kv


@pytest.mark.parametrize("name", list(gf.SPARSE_SPECS))
def test_sparse_model_is_sparse(name, sparse_models):
    path = sparse_models[name]
    spec = gf.sparse_spec(name)
    st = os.stat(path)
    assert st.st_size > spec.data_nbytes > 256 * MiB
    assert st.st_size - spec.data_nbytes < 16 * MiB           # header + tensor table
    assert st.st_blocks * 512 < 64 * MiB, st.st_blocks * 512   # only the header is on disk
    assert _header_counts(path) == (len(spec.tensors), len(spec.kv) + 1)  # + general.architecture


# published sizes of these quantizations, GB (10^9), for a sanity check of the tensor table
# (only where the published file is known here; the other sparse models are shaped by their configs)
_PUBLISHED_GB = {"qwen3-30b-a3b": 18.6, "qwen3-235b-a22b": 142.0, "deepseek-v3": 404.0, "gpt-oss-120b": 63.4,
                 "llama-3.1-8b": 4.92, "gpt-oss-20b": 12.1}


@pytest.mark.parametrize("name", list(_PUBLISHED_GB))
def test_sparse_model_size_matches_published(name):
    assert gf.sparse_spec(name).data_nbytes / 1e9 == pytest.approx(_PUBLISHED_GB[name], rel=0.02)


@pytest.mark.llama
@pytest.mark.parametrize("name", list(gf.SPARSE_SPECS))
def test_sparse_model_accepted_by_fit_params(name, sparse_models, llama_bin):
    spec = gf.sparse_spec(name)
    cmd = [str(llama_bin / "llama-fit-params"), "-m", str(sparse_models[name]), "--fit-print", "on",
           "-c", "4096", "--no-repack", *_RUN_ARGS.get(spec.arch, ())]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stderr[-4000:]}"
    lines = [line.split() for line in out.stdout.splitlines() if line.strip()]
    assert lines and all(len(parts) == 4 for parts in lines), out.stdout
    host = {p[0]: [int(x) for x in p[1:]] for p in lines}["Host"]
    # CPU-only build and --no-repack: every weight is in a plain CPU buffer, so the host "model" column
    # is the whole data region (with CPU_REPACK/AMX buffers it would leave the repacked weights out)
    # NextN/MTP blocks (after the main layers) are not loaded without MTP speculation, except the tensors some
    # loaders create only TENSOR_NOT_REQUIRED there (step35, hy_v3: app.model.index.NEXTN_SKIPPED_ONLY)
    from app.model.index import NEXTN_SKIPPED_ONLY, tensor_base

    n_main = spec.hparams["n_layer"]
    only = NEXTN_SKIPPED_ONLY.get(spec.gguf_arch)
    loaded = sum(t.nbytes for t in spec.tensors if (gf._layer_of(t.name) or 0) < n_main
                 or (only is not None and tensor_base(t.name)[1] not in only))
    if spec.gguf_arch in ("gemma3n", "gemma4") and spec.hparams.get("tied_embeddings"):
        # these loaders create the tied output (token_embd, TENSOR_DUPLICATED) before token_embd itself: a
        # second copy in the same host buffer type (app/memory/layout.py OUTPUT_FIRST_ARCHS)
        loaded += next(t.nbytes for t in spec.tensors if t.name == "token_embd.weight")
    assert host[0] == pytest.approx(loaded / MiB, rel=0.01), out.stdout


@pytest.mark.llama
def test_sparse_model_fit_across_rpc_servers(sparse_models, llama_bin, rpc_servers):
    a, b = rpc_servers(2, memory_mib=[8000, 16000])
    cmd = [str(llama_bin / "llama-fit-params"), "-m", str(sparse_models["qwen3-30b-a3b"]),
           "--rpc", f"{a.endpoint},{b.endpoint}", "--fit-print", "on", "-c", "4096", *CPU_WORKAROUND_ARGS]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-4000:]
    rows = {p[0]: [int(x) for x in p[1:]] for p in (line.split() for line in out.stdout.splitlines()) if p}
    assert set(rows) == {"RPC0", "RPC1", "Host"}, out.stdout
    # both devices hold weights, the larger one more
    assert 0 < rows["RPC0"][0] < rows["RPC1"][0]
