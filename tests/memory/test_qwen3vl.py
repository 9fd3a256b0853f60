"""Qwen3-VL's text models (``qwen3vl``, ``qwen3vlmoe``): the deepstack input row and IMRoPE positions in the
replayed graph, and the layer compression keeping the deepstack layers' peaks (the accuracy matrix compares
the figures to llama.cpp: tests/memory/accuracy.py ``vl*`` cases, test_accuracy_llama.py server cases)."""

from __future__ import annotations

import pytest

from app.command.parse import settings_from_args
from app.lanes import Lane
from app.memory.compute import CHECKED_ARCHS, core, family_of
from app.memory.estimator import Estimator, estimate
from app.model import open_model
from app.model.hparams import MetadataError
from tests.gguf_factory import model_spec, write_sparse_model, write_spec, write_tiny_model

GiB = 1 << 30


@pytest.mark.parametrize("arch", ["qwen3vl", "qwen3vlmoe"])
def test_deepstack_input_row_and_imrope_positions(arch, tmp_path):
    model = open_model(write_tiny_model(arch, tmp_path / f"{arch}.gguf"))
    p = model.params
    n_ds = p.n_deepstack_layers
    assert n_ds == int(model.metadata[f"{arch}.n_deepstack_layers"]) == 2 and family_of(arch).name == "qwen3vl" and arch in CHECKED_ARCHS
    est = Estimator(model)
    assert est.estimate([], settings_from_args(["-c", "4096", "-ub", "256"], tool="fit-params")).host.compute > 0
    (b,) = est.compute_facts["graphs"].values()
    nt = b.nt
    assert nt == 256
    # n_embd_inp = n_embd * (1 + n_deepstack_layers): the vector input and the padded token rows
    assert b.inputs["inp_embd"].ne[:2] == (p.n_embd * (1 + n_ds), nt)
    pads = [t for t in b.g.nodes if t.op == "PAD"]
    assert [t.ne[:2] for t in pads] == [(p.n_embd * (1 + n_ds), nt)]
    assert pads[0].src[0].op == "GET_ROWS"
    # IMRoPE: 4 positions per token
    assert b.inputs["inp_pos"].ne[0] == 4 * nt
    # one deepstack add per deepstack layer: an ADD of a view of the layer input's view of the padded rows
    ds_adds = [t for t in b.g.nodes if t.op == "ADD" and t.src[1].op == "VIEW" and t.src[1].vs is pads[0]
               and t.src[1].src[0].op == "VIEW"]
    assert len(ds_adds) == n_ds


@pytest.mark.parametrize("spec", ["qwen3-vl-8b", "qwen3-vl-235b-a22b"])
def test_compressed_graph_keeps_deepstack_peaks(spec, tmp_path, monkeypatch):
    """The deepstack layers look like the others to the compression: every split at and around them (-ngl just
    short of all, a first device with 1-3 layers) gives the uncut graph's buffers."""
    model = open_model(write_sparse_model(spec, tmp_path / f"{spec}.gguf"))
    devices = [Lane(f"RPC{i}", f"RPC{i}[127.0.0.1:{5000 + i}]", 96 * GiB, 96 * GiB, "rpc") for i in range(3)]
    n = model.params.n_layer
    argsets = [["-c", "8192", "-ngl", str(ngl), "-fa", "on"] for ngl in (n - 4, n - 3, n - 2, n - 1)]
    argsets += [["-c", "8192", "-ngl", "all", "-ts", ts, "-fa", "off"] for ts in ("1,40,40", "3,40,40", "2,1,40")]
    for args in argsets:
        for tool in ("fit-params", "server"):
            s = settings_from_args(args, tool=tool)
            fast = estimate(model, devices, s)
            monkeypatch.setattr(core, "compress", lambda sigs, hood=1: list(range(len(sigs))))
            full = estimate(model, devices, s)
            monkeypatch.undo()
            for a, b in zip(fast.devices, full.devices, strict=True):
                assert b.compute > 0 and abs(a.compute - b.compute) <= 4096, (args, tool, a.name, a.compute, b.compute)


def test_rope_sections_are_required(tmp_path):
    """llama_model_qwen3vl::load_arch_hparams reads rope.dimension_sections as required: a file without it is
    refused with llama.cpp's reason."""
    spec = model_spec("qwen3vl")
    del spec.kv["qwen3vl.rope.dimension_sections"]
    with pytest.raises(MetadataError, match="qwen3vl.rope.dimension_sections is missing"):
        open_model(write_spec(spec, tmp_path / "no-sections.gguf"))
