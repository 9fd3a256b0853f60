"""The estimator-vs-llama.cpp accuracy matrix, shared by the test and ``benchmarks/bench_estimator_accuracy.py``.

Each case is a llama.cpp command line (as a user would pass it, minus ``-m``
and ``--rpc``) on a model and a number of loopback RPC devices. The reference
is ``llama-fit-params --fit-print on`` with the same arguments plus
``--no-repack`` (the CPU build would otherwise repack CPU weights into a
``CPU_REPACK`` buffer that the printed table leaves out).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from app.llamacpp.fit_print import FitRow, run_fit_print
from app.command.parse import settings_from_args
from app.memory.estimator import Estimate, estimate
from app.lanes import Lane
from app.model import open_model

MiB = 1 << 20

#: When set, the accuracy tests append one JSON line per case to this file (scripts/coverage.py reads it).
RESULTS_ENV = "LAYERDECK_COVERAGE_RESULTS"


def record(test: str, **fields) -> None:
    """Append a result line for scripts/coverage.py (no-op unless ``$LAYERDECK_COVERAGE_RESULTS`` is set)."""
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(dict(test=test, **fields)) + "\n")


@dataclass(frozen=True)
class Case:
    id: str
    model: str          # key: a sparse spec name or "tiny:<arch>"
    n_rpc: int
    args: tuple[str, ...]
    compute_off: str = ""  # why compute is known not to match yet (the architecture is then not marked exact)


def _c(id, model, n_rpc, args, compute_off=""):
    return Case(id, model, n_rpc, tuple(args.split()), compute_off)


CASES: list[Case] = [
    # Qwen3-30B-A3B (qwen3moe, 48 layers, 128 experts)
    _c("q30-cpu-4k", "qwen3-30b-a3b", 0, "-c 4096"),
    _c("q30-cpu-32k-faoff", "qwen3-30b-a3b", 0, "-c 32768 -fa off"),
    _c("q30-1rpc-all", "qwen3-30b-a3b", 1, "-c 8192 -ngl all -fa on"),
    _c("q30-2rpc-ts31", "qwen3-30b-a3b", 2, "-c 8192 -ngl all -ts 3,1 -fa off"),
    _c("q30-3rpc-ts121-q8", "qwen3-30b-a3b", 3, "-c 16384 -ngl all -ts 1,2,1 -fa on -ctk q8_0 -ctv q8_0"),
    _c("q30-1rpc-cmoe", "qwen3-30b-a3b", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("q30-2rpc-ncmoe", "qwen3-30b-a3b", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 20 -fa off"),
    _c("q30-1rpc-ot", "qwen3-30b-a3b", 1, r"-c 4096 -ngl all -ot blk\.(1[0-9]|2[0-3])\.ffn_(up|gate|down)_exps=CPU"),
    _c("q30-1rpc-ngl20", "qwen3-30b-a3b", 1, "-c 4096 -ngl 20 -fa on"),
    _c("q30-2rpc-np4", "qwen3-30b-a3b", 2, "-c 16384 -np 4 -ngl all -ts 2,1 -fa on"),
    _c("q30-1rpc-long-q4", "qwen3-30b-a3b", 1, "-c 65536 -ngl all -fa on -ctk q4_0 -ctv q4_0 -ub 1024"),
    # Qwen3-235B-A22B (94 layers)
    _c("q235-cpu", "qwen3-235b-a22b", 0, "-c 4096"),
    _c("q235-3rpc-cmoe", "qwen3-235b-a22b", 3, "-c 32768 -ngl all -ts 1,1,1 -cmoe -fa on"),
    _c("q235-2rpc-ngl50", "qwen3-235b-a22b", 2, "-c 8192 -ngl 50 -ts 1,3 -fa off"),
    # DeepSeek-V3 (MLA, dense leading layers, shared experts)
    _c("dsv3-cpu", "deepseek-v3", 0, "-c 4096 -fa on"),
    _c("dsv3-1rpc-cmoe", "deepseek-v3", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("dsv3-2rpc-faoff", "deepseek-v3", 2, "-c 4096 -ngl all -ts 1,1 -cmoe -fa off"),
    _c("dsv3-1rpc-q8", "deepseek-v3", 1, "-c 32768 -ngl all -cmoe -fa on -ctk q8_0 -ctv q8_0"),
    # gpt-oss-120b (sliding window, sinks, MXFP4)
    _c("goss-cpu", "gpt-oss-120b", 0, "-c 8192 -fa on"),
    _c("goss-1rpc-cmoe", "gpt-oss-120b", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("goss-2rpc-swafull", "gpt-oss-120b", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -fa on -ncmoe 10"),
    _c("goss-1rpc-faoff-np", "gpt-oss-120b", 1, "-c 8192 -np 2 -ngl all -cmoe -fa off"),
    # split modes: -sm none (the whole model on -mg), -sm tensor (one Meta() device made of all of them)
    _c("l8b-2rpc-smnone-mg1", "llama-3.1-8b", 2, "-c 8192 -ngl all -sm none -mg 1"),
    _c("q30-2rpc-smnone-cmoe", "qwen3-30b-a3b", 2, "-c 8192 -ngl all -sm none -cmoe -fa off"),
    _c("l8b-2rpc-smtensor", "llama-3.1-8b", 2, "-c 8192 -ngl all -sm tensor -fa on"),
    _c("q30-2rpc-smtensor-ngl20-np2", "qwen3-30b-a3b", 2, "-c 16384 -ngl 20 -sm tensor -ts 3,1 -np 2"),
    _c("q30-3rpc-smtensor-cmoe-q8", "qwen3-30b-a3b", 3, "-c 32768 -ngl all -sm tensor -cmoe -ctk q8_0 -ctv q8_0"),
    # one full-size (sparse) model per further architecture: every buffer compared is tens of MiB or more
    # (the tiny models, whose buffers are a few MiB, are compared in server mode in test_accuracy_llama.py)
    _c("l8b-2rpc", "llama-3.1-8b", 2, "-c 8192 -ngl all -ts 1,1"),
    _c("l8b-1rpc-nkvo", "llama-3.1-8b", 1, "-c 8192 -ngl all -nkvo -fa off"),
    _c("l8b-2rpc-ngl20-ub64", "llama-3.1-8b", 2, "-c 8192 -ngl 20 -ts 1,1 -ub 64 -fa off"),
    _c("l8b-1rpc-ub2048", "llama-3.1-8b", 1, "-c 16384 -ngl all -ub 2048 -b 4096"),
    _c("l8b-cpu-q8", "llama-3.1-8b", 0, "-c 32768 -ctk q8_0 -ctv q8_0 -fa on"),
    _c("mix-2rpc-ncmoe", "mixtral-8x7b", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 8"),
    _c("mix-cpu-faoff", "mixtral-8x7b", 0, "-c 4096 -fa off"),
    _c("q57-1rpc-cmoe", "qwen2-57b-a14b", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("q57-3rpc-ncmoe", "qwen2-57b-a14b", 3, "-c 8192 -ngl all -ts 1,1,2 -ncmoe 4 -fa off"),
    _c("dsv2l-1rpc-cmoe", "deepseek-v2-lite", 1, "-c 8192 -ngl all -cmoe"),
    _c("dsv2l-2rpc", "deepseek-v2-lite", 2, "-c 16384 -ngl all -ts 1,1 -fa on"),
    _c("goss20-2rpc", "gpt-oss-20b", 2, "-c 8192 -ngl all -ts 2,1 -fa on"),
    _c("goss20-cpu-faoff", "gpt-oss-20b", 0, "-c 16384 -fa off"),
    _c("scout-1rpc-cmoe", "llama-4-scout", 1, "-c 16384 -ngl all -cmoe"),
    _c("scout-2rpc-cmoe", "llama-4-scout", 2, "-c 32768 -ngl all -ts 1,1 -cmoe -fa on"),
    _c("air-1rpc-cmoe", "glm-4.5-air", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("air-2rpc-ncmoe", "glm-4.5-air", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 20 -fa off"),
    _c("granite-1rpc-np2", "granite-4.0-h-small", 1, "-c 8192 -ngl all -np 2"),
    _c("granite-2rpc", "granite-4.0-h-small", 2, "-c 16384 -ngl all -ts 1,1"),
    _c("granite-cpu", "granite-4.0-h-small", 0, "-c 8192"),
    # gemma3 (SWA 5:1 with a 1024 window, tied embeddings loaded twice, post norms)
    _c("g27-cpu", "gemma-3-27b", 0, "-c 8192"),
    _c("g27-2rpc-ts12", "gemma-3-27b", 2, "-c 32768 -ngl all -ts 1,2 -fa on"),
    _c("g27-1rpc-ngl40-faoff", "gemma-3-27b", 1, "-c 16384 -ngl 40 -fa off"),
    _c("g27-2rpc-swafull-q8", "gemma-3-27b", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -fa on -ctk q8_0 -ctv q8_0"),
    _c("g4-1rpc-np4", "gemma-3-4b", 1, "-c 32768 -np 4 -ngl all -fa on"),
    _c("g4-3rpc-faoff", "gemma-3-4b", 3, "-c 8192 -ngl all -ts 1,1,1 -fa off"),
    # dense Qwen3 (tied embeddings on the 4B) and Qwen2.5 (qkv biases)
    _c("q8b-2rpc-ts13", "qwen3-8b", 2, "-c 16384 -ngl all -ts 1,3 -fa on"),
    _c("q8b-cpu-faoff", "qwen3-8b", 0, "-c 8192 -fa off"),
    _c("q4b-1rpc-ngl20", "qwen3-4b", 1, "-c 32768 -ngl 20 -fa on -ctk q8_0 -ctv q8_0"),
    _c("q25-7b-2rpc", "qwen2.5-7b", 2, "-c 32768 -ngl all -ts 1,1 -np 2 -fa on"),
    _c("q25-7b-1rpc-faoff", "qwen2.5-7b", 1, "-c 8192 -ngl all -fa off -ub 256"),
    # Granite 3.x dense and MoE (scales), OLMoE (2-D q/k norms, unnormalised expert weights)
    _c("gr8b-2rpc", "granite-3.3-8b", 2, "-c 16384 -ngl all -ts 1,1 -fa on"),
    _c("gr8b-1rpc-ngl30-faoff", "granite-3.3-8b", 1, "-c 8192 -ngl 30 -fa off"),
    _c("grmoe-1rpc-cmoe", "granite-3.1-3b-a800m", 1, "-c 32768 -ngl all -cmoe"),
    _c("grmoe-3rpc", "granite-3.1-3b-a800m", 3, "-c 16384 -ngl all -ts 1,1,1 -fa off -np 2"),
    _c("olmoe-1rpc-ncmoe", "olmoe-1b-7b", 1, "-c 4096 -ngl all -ncmoe 8 -fa on"),
    _c("olmoe-2rpc-faoff", "olmoe-1b-7b", 2, "-c 4096 -ngl all -ts 1,1 -fa off"),
    _c("olmoe-cpu", "olmoe-1b-7b", 0, "-c 4096"),
    # Ministral 3 (attention temperature), Seed-OSS (post_attention_norm FFN), SmolLM3 (NoPE every 4th layer)
    _c("min3-2rpc", "ministral-3-14b", 2, "-c 32768 -ngl all -ts 1,1 -fa on"),
    _c("min3-1rpc-ngl25-faoff", "ministral-3-14b", 1, "-c 8192 -ngl 25 -fa off"),
    _c("seed-3rpc", "seed-oss-36b", 3, "-c 16384 -ngl all -ts 1,1,1 -fa on -ctk q8_0 -ctv q8_0"),
    _c("seed-cpu", "seed-oss-36b", 0, "-c 4096 -fa off"),
    _c("smol-1rpc", "smollm3-3b", 1, "-c 65536 -ngl all -fa on"),
    _c("smol-2rpc-np2-faoff", "smollm3-3b", 2, "-c 16384 -ngl all -ts 2,1 -np 2 -fa off"),
    # pure Mamba2: recurrent state only (no KV), per sequence
    _c("m2-cpu", "mamba2-2.7b", 0, "-c 4096"),
    _c("m2-2rpc-np2", "mamba2-2.7b", 2, "-c 8192 -ngl all -ts 1,1 -np 2"),
    _c("m2-2rpc-np4", "mamba2-2.7b", 2, "-c 8192 -ngl all -ts 1,1 -np 4"),
    _c("m2-3rpc-np8", "mamba2-2.7b", 3, "-c 16384 -ngl all -ts 1,1,1 -np 8"),
    _c("mcod-1rpc-ngl40", "mamba-codestral-7b", 1, "-c 16384 -ngl 40 -ub 1024"),
    _c("mcod-3rpc", "mamba-codestral-7b", 3, "-c 8192 -ngl all -ts 1,1,2 -np 2"),
    # Qwen3-VL text models (qwen3vl / qwen3vlmoe: Qwen3's layers with IMRoPE, and deepstack: the input row is
    # n_embd x 4 wide, padded token rows kept until the 3rd layer adds its part; -ngl 34 / 46 split those layers)
    _c("vl8b-cpu", "qwen3-vl-8b", 0, "-c 4096"),
    _c("vl8b-2rpc-ts13", "qwen3-vl-8b", 2, "-c 16384 -ngl all -ts 1,3 -fa on"),
    _c("vl8b-1rpc-ngl20-faoff", "qwen3-vl-8b", 1, "-c 8192 -ngl 20 -fa off"),
    _c("vl8b-3rpc-np4-q8", "qwen3-vl-8b", 3, "-c 32768 -ngl all -ts 1,1,2 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("vl8b-1rpc-ub1024-faoff", "qwen3-vl-8b", 1, "-c 16384 -ngl all -ub 1024 -fa off"),
    _c("vl4b-1rpc-ngl34", "qwen3-vl-4b", 1, "-c 8192 -ngl 34 -fa on"),
    _c("vl4b-3rpc-ts1-20-20-np2", "qwen3-vl-4b", 3, "-c 32768 -ngl all -ts 1,20,20 -np 2 -fa off"),
    _c("vl30-cpu", "qwen3-vl-30b-a3b", 0, "-c 4096"),
    _c("vl30-1rpc-cmoe", "qwen3-vl-30b-a3b", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("vl30-2rpc-ncmoe-faoff", "qwen3-vl-30b-a3b", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 20 -fa off"),
    _c("vl30-3rpc-np4-q8", "qwen3-vl-30b-a3b", 3, "-c 32768 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("vl30-1rpc-ngl46-ub256", "qwen3-vl-30b-a3b", 1, "-c 8192 -ngl 46 -ub 256"),
    _c("vl235-3rpc-cmoe", "qwen3-vl-235b-a22b", 3, "-c 32768 -ngl all -ts 1,1,1 -cmoe -fa on"),
    _c("vl235-2rpc-ngl50-faoff", "qwen3-vl-235b-a22b", 2, "-c 8192 -ngl 50 -ts 1,3 -fa off"),
    _c("vl8b-1rpc-nkvo", "qwen3-vl-8b", 1, "-c 8192 -ngl all -nkvo -fa off"),
    _c("vl30-2rpc-long-q4-ub1024", "qwen3-vl-30b-a3b", 2,
       "-c 65536 -ngl all -ts 1,1 -fa on -ctk q4_0 -ctv q4_0 -ub 1024"),
    _c("vl30-1rpc-ot", "qwen3-vl-30b-a3b", 1,
       r"-c 4096 -ngl all -ot blk\.(1[0-9]|2[0-3])\.ffn_(up|gate|down)_exps=CPU"),
    _c("vl235-cpu", "qwen3-vl-235b-a22b", 0, "-c 4096 -fa on"),
    # Nemotron-H hybrids: Mamba2 layers (recurrent state per sequence), a few attention layers without rope (KV) and
    # FFN-only layers (squared-ReLU MLP, or sigmoid experts + shared expert in nemotron_h_moe)
    _c("nh9-cpu", "nemotron-nano-9b-v2", 0, "-c 4096"),
    _c("nh9-1rpc", "nemotron-nano-9b-v2", 1, "-c 8192 -ngl all -fa on"),
    _c("nh9-2rpc-np2-faoff", "nemotron-nano-9b-v2", 2, "-c 16384 -ngl all -ts 1,1 -fa off -np 2"),
    _c("nh9-2rpc-np4-q8", "nemotron-nano-9b-v2", 2, "-c 32768 -ngl all -ts 2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("nh9-1rpc-ngl30-ub256", "nemotron-nano-9b-v2", 1, "-c 8192 -ngl 30 -fa off -ub 256"),
    _c("nh12-3rpc", "nemotron-nano-12b-v2", 3, "-c 16384 -ngl all -ts 1,1,1 -fa on"),
    _c("nh12-cpu-np3", "nemotron-nano-12b-v2", 0, "-c 8192 -np 3 -fa off"),
    _c("n3nano-cpu", "nemotron-3-nano-30b-a3b", 0, "-c 4096"),
    _c("n3nano-1rpc-cmoe", "nemotron-3-nano-30b-a3b", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("n3nano-2rpc-ncmoe-faoff", "nemotron-3-nano-30b-a3b", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 10 -fa off"),
    _c("n3nano-3rpc-np4-q8", "nemotron-3-nano-30b-a3b", 3,
       "-c 32768 -ngl all -ts 1,1,2 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("n3nano-1rpc-ngl20-np2", "nemotron-3-nano-30b-a3b", 1, "-c 8192 -ngl 20 -fa off -np 2"),
    _c("n3nano-2rpc-long-ub1024", "nemotron-3-nano-30b-a3b", 2, "-c 65536 -ngl all -ts 3,1 -fa on -ub 1024"),
    # MiniMax-M2 (62 layers, 256 sigmoid experts with selection bias, q/k norms over the whole projection, rope on
    # 64 of 128)
    _c("mm2-cpu", "minimax-m2", 0, "-c 4096"),
    _c("mm2-1rpc-cmoe", "minimax-m2", 1, "-c 8192 -ngl all -cmoe -fa on"),
    _c("mm2-2rpc-ncmoe40-faoff", "minimax-m2", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 40 -fa off"),
    _c("mm2-3rpc-cmoe-q8", "minimax-m2", 3, "-c 32768 -ngl all -ts 1,2,1 -cmoe -fa on -ctk q8_0 -ctv q8_0"),
    _c("mm2-1rpc-ot-ub256", "minimax-m2", 1,
       r"-c 8192 -ngl all -ot blk\.([0-9]|[1-5][0-9])\.ffn_(up|gate|down)_exps=CPU -ub 256"),
    _c("mm2-2rpc-ngl30-np4", "minimax-m2", 2, "-c 16384 -ngl 30 -ts 2,1 -cmoe -np 4 -fa on"),
    _c("mm2-cpu-np2-ub1024", "minimax-m2", 0, "-c 8192 -np 2 -fa off -ub 1024"),
    _c("mm2-fused-2rpc-ncmoe40", "minimax-m2-fused-qkv", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 40 -fa off"),
    # Apertus 8B / 70B (q/k norms per head, ungated xIELU FFN, llama3 rope factors read from each device's copy)
    _c("apertus8-cpu", "apertus-8b", 0, "-c 8192"),
    _c("apertus8-2rpc", "apertus-8b", 2, "-c 32768 -ngl all -ts 1,1 -fa on"),
    _c("apertus8-1rpc-ngl20-faoff", "apertus-8b", 1, "-c 16384 -ngl 20 -fa off"),
    _c("apertus8-3rpc-np4-q8", "apertus-8b", 3, "-c 65536 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("apertus8-1rpc-nkvo-ub256", "apertus-8b", 1, "-c 8192 -ngl all -nkvo -fa off -ub 256"),
    _c("apertus8-2rpc-np2-ub1024", "apertus-8b", 2, "-c 16384 -ngl all -ts 3,1 -np 2 -fa off -ub 1024"),
    _c("apertus70-cpu-faoff", "apertus-70b", 0, "-c 4096 -fa off"),
    _c("apertus70-2rpc-q8", "apertus-70b", 2, "-c 32768 -ngl all -ts 1,1 -fa on -ctk q8_0 -ctv q8_0"),
    _c("apertus70-1rpc-ngl40-np2", "apertus-70b", 1, "-c 16384 -ngl 40 -fa on -np 2"),
    # Gemma 3n E2B / E4B (AltUp streams, LAuReL, per-layer embeddings in host memory, 4:1 sliding window of 512;
    # layers from 20 on reuse layer 18's / 19's KV cache, also across devices)
    _c("g3n2-cpu", "gemma-3n-e2b", 0, "-c 8192"),
    _c("g3n2-1rpc-faoff", "gemma-3n-e2b", 1, "-c 32768 -ngl all -fa off"),
    _c("g3n2-2rpc-ts12", "gemma-3n-e2b", 2, "-c 16384 -ngl all -ts 1,2 -fa on"),
    _c("g3n2-1rpc-ngl20-q8", "gemma-3n-e2b", 1, "-c 32768 -ngl 20 -fa on -ctk q8_0 -ctv q8_0"),
    _c("g3n2-3rpc-np4", "gemma-3n-e2b", 3, "-c 32768 -ngl all -ts 1,1,1 -np 4 -fa on"),
    _c("g3n4-cpu-faoff", "gemma-3n-e4b", 0, "-c 16384 -fa off"),
    _c("g3n4-2rpc-ub1024", "gemma-3n-e4b", 2, "-c 32768 -ngl all -ts 1,1 -ub 1024"),
    _c("g3n4-1rpc-ngl25-np2", "gemma-3n-e4b", 1, "-c 16384 -ngl 25 -np 2 -fa off"),
    _c("g3n4-2rpc-swafull", "gemma-3n-e4b", 2, "-c 16384 -ngl all -ts 3,1 --swa-full -fa on"),
    # Mistral Small 4 (mistral4: DeepSeek-V2's graph and MLA; fused gate_up experts, no dense leading layer)
    _c("ms4-cpu", "mistral-small-4", 0, "-c 8192 -fa on"),
    _c("ms4-1rpc-cmoe", "mistral-small-4", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("ms4-2rpc-ncmoe-faoff", "mistral-small-4", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 12 -fa off"),
    _c("ms4-3rpc-cmoe-q8-np2", "mistral-small-4", 3, "-c 65536 -ngl all -ts 1,2,1 -cmoe -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("ms4-1rpc-ngl20-ub1024", "mistral-small-4", 1, "-c 16384 -ngl 20 -ub 1024 -fa on"),
    # Phi-4 / Phi-4-mini (phi3: fused qkv, fused up + single-tensor SwiGLU; LongRoPE factors and tied embeddings on
    # the mini; the sliding window is read and disabled)
    _c("phi4-cpu", "phi-4", 0, "-c 8192"),
    _c("phi4-2rpc-ts13", "phi-4", 2, "-c 16384 -ngl all -ts 1,3 -fa on"),
    _c("phi4-1rpc-ngl20-faoff", "phi-4", 1, "-c 8192 -ngl 20 -fa off"),
    _c("phi4mini-1rpc-long", "phi-4-mini", 1, "-c 32768 -ngl all -fa on"),
    _c("phi4mini-3rpc-np4-q8", "phi-4-mini", 3, "-c 16384 -ngl all -ts 1,1,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("phi4mini-cpu-short", "phi-4-mini", 0, "-c 4096 -fa off"),
    # Gemma 2 (gemma3's layer without q/k norms, SWA 4096 on every other layer, attention and final soft-capping)
    _c("g2-9b-cpu", "gemma-2-9b", 0, "-c 8192"),
    _c("g2-9b-2rpc-faoff", "gemma-2-9b", 2, "-c 8192 -ngl all -ts 1,1 -fa off"),
    _c("g2-9b-1rpc-ngl20-np2", "gemma-2-9b", 1, "-c 8192 -ngl 20 -np 2 -fa on"),
    _c("g2-27b-3rpc-swafull-q8", "gemma-2-27b", 3, "-c 8192 -ngl all -ts 1,1,1 --swa-full -fa on -ctk q8_0 -ctv q8_0"),
    _c("g2-27b-1rpc-ub1024", "gemma-2-27b", 1, "-c 8192 -ngl all -ub 1024"),
    # ERNIE 4.5 dense (0.3B at f16: the llama layer, tied embeddings)
    _c("ernie03-cpu", "ernie-4.5-0.3b", 0, "-c 16384"),
    _c("ernie03-2rpc-ts12", "ernie-4.5-0.3b", 2, "-c 32768 -ngl all -ts 1,2 -fa on"),
    _c("ernie03-1rpc-ngl10-faoff-np2", "ernie-4.5-0.3b", 1, "-c 16384 -ngl 10 -np 2 -fa off"),
    _c("ernie03-3rpc-q8-ub1024", "ernie-4.5-0.3b", 3, "-c 65536 -ngl all -ts 1,1,1 -ub 1024 -fa on -ctk q8_0 -ctv q8_0"),
    # Qwen2.5-VL text models (qwen2vl: Qwen2's layer with M-RoPE, 4 positions per token)
    _c("vl25-7b-cpu", "qwen2.5-vl-7b", 0, "-c 8192"),
    _c("vl25-7b-2rpc-ts13-faoff", "qwen2.5-vl-7b", 2, "-c 16384 -ngl all -ts 1,3 -fa off"),
    _c("vl25-7b-1rpc-ngl15-np2", "qwen2.5-vl-7b", 1, "-c 16384 -ngl 15 -np 2 -fa on"),
    _c("vl25-3b-3rpc-q8", "qwen2.5-vl-3b", 3, "-c 32768 -ngl all -ts 1,1,1 -fa on -ctk q8_0 -ctv q8_0"),
    _c("vl25-3b-1rpc-ub1024", "qwen2.5-vl-3b", 1, "-c 32768 -ngl all -ub 1024"),
    # Olmo 3 / OLMo 2 (olmo2: no pre-norms, q/k norms over the whole projection, post norms; SWA 3:1 on Olmo 3)
    _c("olmo3-7b-cpu", "olmo-3-7b", 0, "-c 8192"),
    _c("olmo3-7b-2rpc-faoff", "olmo-3-7b", 2, "-c 16384 -ngl all -ts 1,1 -fa off"),
    _c("olmo3-7b-1rpc-swafull-np2", "olmo-3-7b", 1, "-c 16384 -ngl all --swa-full -np 2 -fa on"),
    _c("olmo3-7b-3rpc-ngl20-q8", "olmo-3-7b", 3, "-c 32768 -ngl 20 -ts 1,2,1 -fa on -ctk q8_0 -ctv q8_0"),
    _c("olmo2-13b-1rpc", "olmo-2-13b", 1, "-c 4096 -ngl all -ub 1024"),
    # EXAONE 3.5 (exaone: the llama layer with a rope_freqs tensor; tied embeddings on the 2.4B)
    _c("exa35-8b-cpu", "exaone-3.5-7.8b", 0, "-c 8192"),
    _c("exa35-8b-2rpc-ts12-faoff", "exaone-3.5-7.8b", 2, "-c 16384 -ngl all -ts 1,2 -fa off"),
    _c("exa35-8b-1rpc-ngl20-np2", "exaone-3.5-7.8b", 1, "-c 16384 -ngl 20 -np 2 -fa on"),
    _c("exa35-2b-3rpc-np4", "exaone-3.5-2.4b", 3, "-c 32768 -ngl all -ts 1,1,1 -np 4 -fa on"),
    _c("exa35-2b-1rpc-faoff-ctkq8", "exaone-3.5-2.4b", 1, "-c 32768 -ngl all -fa off -ctk q8_0"),
    # Falcon-H1 (falcon-h1: attention + Mamba2 side by side in every layer, so every layer has a KV cache and a
    # recurrent state; SwiGLU FFN; grouped Mamba norm on the 7B, none on the 1.5B)
    _c("fh7-cpu", "falcon-h1-7b", 0, "-c 4096"),
    _c("fh7-1rpc", "falcon-h1-7b", 1, "-c 16384 -ngl all -fa on"),
    _c("fh7-2rpc-np2-faoff", "falcon-h1-7b", 2, "-c 8192 -ngl all -ts 1,1 -fa off -np 2"),
    _c("fh7-3rpc-np4-q8", "falcon-h1-7b", 3, "-c 32768 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("fh7-1rpc-ngl30-ub256", "falcon-h1-7b", 1, "-c 8192 -ngl 30 -fa off -ub 256"),
    _c("fh15-cpu-np3", "falcon-h1-1.5b", 0, "-c 8192 -np 3 -fa off"),
    _c("fh15-2rpc-ub1024", "falcon-h1-1.5b", 2, "-c 65536 -ngl all -ts 3,1 -fa on -ub 1024"),
    # AI21 Jamba Mini 1.7 (jamba: Mamba-1 layers, attention on 4 of 32 layers without rope, 16 softmax experts on
    # the odd layers, dense SwiGLU FFN on the even ones)
    _c("jm-cpu", "jamba-mini-1.7", 0, "-c 4096"),
    _c("jm-1rpc-cmoe", "jamba-mini-1.7", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("jm-2rpc-ncmoe-faoff", "jamba-mini-1.7", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 6 -fa off"),
    _c("jm-3rpc-np4-q8", "jamba-mini-1.7", 3, "-c 65536 -ngl all -ts 1,1,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("jm-1rpc-ngl20-np2", "jamba-mini-1.7", 1, "-c 8192 -ngl 20 -fa off -np 2"),
    _c("jm-2rpc-ub1024", "jamba-mini-1.7", 2, "-c 32768 -ngl all -ts 3,1 -cmoe -fa on -ub 1024"),
    _c("fh15-1rpc-ot-ssm", "falcon-h1-1.5b", 1, r"-c 16384 -ngl all -ot blk\.(1[0-9])\.ssm_(in|out)=CPU -fa on"),
    _c("jm-1rpc-nkvo-cmoe", "jamba-mini-1.7", 1, "-c 16384 -ngl all -nkvo -cmoe -fa off"),
    # falcon-h1 cases here
    # Gemma 4 (gemma4): E2B (per-layer embeddings, 20 KV-sharing layers, double-wide FFNs), 26B-A4B (MoE + shared
    # MLP, K=V full layers), 31B; 256/512 head sizes on sliding/full layers
    _c("g4e2-cpu", "gemma-4-e2b", 0, "-c 8192"),
    _c("g4e2-1rpc-faoff", "gemma-4-e2b", 1, "-c 32768 -ngl all -fa off"),
    _c("g4e2-2rpc-ts12-q8", "gemma-4-e2b", 2, "-c 16384 -ngl all -ts 1,2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("g4e2-3rpc-np4", "gemma-4-e2b", 3, "-c 32768 -ngl all -ts 1,1,1 -np 4 -fa on"),
    _c("g4e2-1rpc-ngl20-ub1024", "gemma-4-e2b", 1, "-c 16384 -ngl 20 -ub 1024"),
    _c("g4e4-2rpc-ts31-faoff", "gemma-4-e4b", 2, "-c 16384 -ngl all -ts 3,1 -fa off"),
    _c("g4e4-1rpc-ngl30-np2-q8", "gemma-4-e4b", 1, "-c 32768 -ngl 30 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("g4moe-cpu-faoff", "gemma-4-26b-a4b", 0, "-c 16384 -fa off"),
    _c("g4moe-1rpc-cmoe", "gemma-4-26b-a4b", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("g4moe-2rpc-ncmoe10-ub1024", "gemma-4-26b-a4b", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 10 -ub 1024"),
    _c("g4moe-3rpc-q8-np2", "gemma-4-26b-a4b", 3, "-c 32768 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("g4-31b-1rpc-ngl30-q8", "gemma-4-31b", 1, "-c 16384 -ngl 30 -fa on -ctk q8_0 -ctv q8_0"),
    _c("g4-31b-2rpc-swafull-np2", "gemma-4-31b", 2, "-c 16384 -ngl all -ts 3,1 --swa-full -fa off -np 2"),
    # gemma4 cases here
    # North Mini Code (cohere2moe: parallel block, dense global first layer, SWA 3:1 over 4096 with NoPE global
    # layers, 128 sigmoid experts, tied embeddings with a logit scale; the last layer keeps every token)
    _c("nmc-cpu", "north-mini-code-1.0", 0, "-c 8192"),
    _c("nmc-1rpc-cmoe", "north-mini-code-1.0", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("nmc-2rpc-ncmoe-faoff", "north-mini-code-1.0", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 20 -fa off"),
    _c("nmc-3rpc-np4-q8", "north-mini-code-1.0", 3, "-c 65536 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("nmc-1rpc-ngl20-ub1024", "north-mini-code-1.0", 1, "-c 16384 -ngl 20 -ub 1024 -fa on"),
    _c("nmc-2rpc-swafull-np2", "north-mini-code-1.0", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -np 2"),
    _c("nmc-cpu-faoff-16k", "north-mini-code-1.0", 0, "-c 16384 -fa off"),
    _c("nmc-cpu-ub1024-q8", "north-mini-code-1.0", 0, "-c 32768 -ub 1024 -fa on -ctk q8_0 -ctv q8_0"),
    # MiMo-V2-Flash (mimo2: K heads 192 / V heads 128, 4 or 8 KV heads per layer, SWA over 128 with sinks on 39 of
    # 48 layers, value scale, 256 sigmoid experts with selection bias, 3 skipped NextN blocks)
    _c("mimo-cpu", "mimo-v2-flash", 0, "-c 8192"),
    _c("mimo-cpu-faoff", "mimo-v2-flash", 0, "-c 8192 -fa off"),
    _c("mimo-1rpc-cmoe", "mimo-v2-flash", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("mimo-2rpc-ncmoe-faoff", "mimo-v2-flash", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 30 -fa off"),
    _c("mimo-3rpc-cmoe-np4-q8", "mimo-v2-flash", 3, "-c 65536 -ngl all -ts 1,2,1 -cmoe -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("mimo-1rpc-ngl20-ub1024", "mimo-v2-flash", 1, "-c 16384 -ngl 20 -ub 1024 -fa on"),
    _c("mimo-2rpc-cmoe-swafull-np2", "mimo-v2-flash", 2, "-c 16384 -ngl all -ts 1,1 -cmoe --swa-full -np 2"),
    # cohere2moe cases here
    # Arcee AFM (the llama layer with a squared-ReLU FFN without a gate)
    _c("afm-cpu", "afm-4.5b", 0, "-c 16384"),
    _c("afm-2rpc-ngl20-faoff", "afm-4.5b", 2, "-c 16384 -ngl 20 -ts 1,1 -fa off"),
    _c("afm-3rpc-np4-q8", "afm-4.5b", 3, "-c 65536 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    # openPangu Embedded (the llama layer with an attention-output bias; 1B ties its head)
    _c("pangu7-cpu-faoff", "pangu-embedded-7b", 0, "-c 8192 -fa off"),
    _c("pangu7-2rpc-ub1024", "pangu-embedded-7b", 2, "-c 16384 -ngl all -ts 1,1 -ub 1024 -fa on"),
    _c("pangu1-1rpc-ngl20-np2", "pangu-embedded-1b", 1, "-c 16384 -ngl 20 -np 2 -fa on"),
    # Nanbeige 4 (the llama layer, one pass)
    _c("nanbeige-cpu", "nanbeige4-3b", 0, "-c 16384"),
    _c("nanbeige-3rpc-np2-faoff", "nanbeige4-3b", 3, "-c 32768 -ngl all -ts 1,1,1 -np 2 -fa off"),
    # Maincoder (q/k norms after rope)
    _c("maincoder-cpu", "maincoder-1b", 0, "-c 16384"),
    _c("maincoder-2rpc-ngl20-q8", "maincoder-1b", 2, "-c 32768 -ngl 20 -ts 1,1 -fa on -ctk q8_0 -ctv q8_0"),
    _c("maincoder-1rpc-faoff-ub1024", "maincoder-1b", 1, "-c 8192 -ngl all -fa off -ub 1024"),
    # Mellum MoE (q/k norms, normalised softmax experts on every layer, SWA 3 of 4 layers)
    _c("mellum-cpu", "mellum-12b-a2.5b", 0, "-c 16384"),
    _c("mellum-1rpc-cmoe", "mellum-12b-a2.5b", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("mellum-2rpc-ncmoe-faoff-np2", "mellum-12b-a2.5b", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 10 -fa off -np 2"),
    _c("mellum-2rpc-swafull", "mellum-12b-a2.5b", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -fa on"),
    _c("mellum-full-3rpc-q8", "mellum-12b-a2.5b-full", 3, "-c 32768 -ngl all -ts 1,2,1 -fa on -ctk q8_0 -ctv q8_0"),
    # Baichuan 2 (rope on the 7B, ALiBi without inp_pos on the 13B) and Refact (ALiBi, MQA)
    _c("bc7-cpu", "baichuan2-7b", 0, "-c 4096"),
    _c("bc7-2rpc-ngl20-faoff", "baichuan2-7b", 2, "-c 4096 -ngl 20 -ts 1,1 -fa off"),
    _c("bc13-cpu-faoff", "baichuan2-13b", 0, "-c 4096 -fa off"),
    _c("bc13-3rpc-np2-q8", "baichuan2-13b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("bc13-1rpc-ngl30-ub1024", "baichuan2-13b", 1, "-c 4096 -ngl 30 -ub 1024"),
    _c("refact-cpu", "refact-1.6b", 0, "-c 4096"),
    _c("refact-2rpc-faoff-np4", "refact-1.6b", 2, "-c 16384 -ngl all -ts 1,1 -fa off -np 4"),
    _c("refact-1rpc-ngl20-ub1024", "refact-1.6b", 1, "-c 8192 -ngl 20 -ub 1024 -fa on"),
    # Talkie (weightless RMS norms, a per-head Q gain, scaled output projections, an embedding skip per layer)
    # HRM-Text: 72 cache slots over 24 physical blocks; a slot's ops follow its block's weights (placed by the
    # block's number), its KV cache sits on the slot's own device: -ngl 30 puts every layer weight on the CPU, and the
    # output and the last 29 slots' caches on RPC0
    _c("mimir-cpu", "dfm-mimir-1b", 0, "-c 8192"),
    _c("mimir-1rpc-ngl30", "dfm-mimir-1b", 1, "-c 8192 -ngl 30"),
    _c("mimir-2rpc-ts13-faoff", "dfm-mimir-1b", 2, "-c 8192 -ngl all -ts 1,3 -fa off"),
    _c("mimir-3rpc-np4-q8", "dfm-mimir-1b", 3, "-c 16384 -ngl all -ts 1,1,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("mimir-1rpc-ngl60-ub1024", "dfm-mimir-1b", 1, "-c 8192 -ngl 60 -ub 1024"),
    _c("hrmtied-2rpc-ngl20-np2", "hrm-text-tied", 2, "-c 8192 -ngl 20 -ts 1,1 -np 2"),
    _c("hrmtied-cpu-faoff", "hrm-text-tied", 0, "-c 8192 -fa off"),
    # Granite Switch (a dense Granite with stacked LoRA adapters read through MUL_MAT_ID, one adapter slot per
    # token; llama.cpp adds the router's one-head attention layer after the 40 real ones: -ngl and -ts count it,
    # its KV cache sits on the output's device)
    _c("gsw3-cpu", "granite-switch-3b", 0, "-c 8192"),
    _c("gsw3-1rpc-ngl20", "granite-switch-3b", 1, "-c 8192 -ngl 20"),
    _c("gsw3-2rpc-ts13-faoff", "granite-switch-3b", 2, "-c 16384 -ngl all -ts 1,3 -fa off"),
    _c("gsw3-3rpc-np4-q8", "granite-switch-3b", 3, "-c 32768 -ngl all -ts 1,1,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("gsw3-1rpc-ngl41-ub1024", "granite-switch-3b", 1, "-c 8192 -ngl 41 -ub 1024"),
    _c("gsw8-2rpc-ngl30-np2", "granite-switch-8b", 2, "-c 8192 -ngl 30 -ts 1,1 -np 2"),
    _c("gsw8-cpu-faoff", "granite-switch-8b", 0, "-c 8192 -fa off"),
    # dots3-note (DeepSeek-V3.2's DSA on every 4th layer; the others slide over a K-only MLA cache of their own
    # geometry and head count; a head-wise output gate everywhere)
    _c("d3n-cpu", "dots3-note", 0, "-c 8192"),
    _c("d3n-1rpc-cmoe", "dots3-note", 1, "-c 16384 -ngl all -cmoe"),
    _c("d3n-2rpc-ts13-ncmoe30-faoff", "dots3-note", 2, "-c 8192 -ngl all -ts 1,3 -ncmoe 30 -fa off"),
    _c("d3n-3rpc-cmoe-np4-q8", "dots3-note", 3, "-c 32768 -ngl all -ts 1,1,1 -cmoe -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("d3n-1rpc-ngl20-ub1024", "dots3-note", 1, "-c 8192 -ngl 20 -ub 1024"),
    _c("d3n-2rpc-cmoe-swafull", "dots3-note", 2, "-c 16384 -ngl all -ts 1,1 -cmoe --swa-full"),
    # T5 (Flan-T5: an encoder and a decoder whose layer N share layer N's device; the KV cache is the decoder's
    # self-attention; llama.cpp reserves the decoder's graph, cross attention over n_ctx_train encoder rows)
    _c("ft5l-cpu", "flan-t5-large", 0, "-c 4096"),
    _c("ft5l-1rpc-ngl12", "flan-t5-large", 1, "-c 4096 -ngl 12"),
    _c("ft5l-2rpc-ts13-faoff", "flan-t5-large", 2, "-c 8192 -ngl all -ts 1,3 -fa off"),
    _c("ft5xl-3rpc-q8", "flan-t5-xl", 3, "-c 16384 -ngl all -ts 1,1,1 -fa on -ctk q8_0 -ctv q8_0"),
    _c("ft5xl-1rpc-ub1024", "flan-t5-xl", 1, "-c 8192 -ngl all -ub 1024"),
    # a decoder of 4 layers under an encoder of 12 (the other 8 layers' caches exist, no decoder op reads them), a
    # ReLU FFN without a gate
    _c("t5dl4-cpu", "t5-efficient-base-dl4", 0, "-c 2048"),
    _c("t5dl4-2rpc-ngl8-faoff", "t5-efficient-base-dl4", 2, "-c 4096 -ngl 8 -ts 1,1 -fa off"),
    # MiniMax-01 (lightning attention on 7 of 8 layers: a head x head state per head and sequence, the diagonal
    # decay input of n_seq_tokens^2 per head; softmax attention on every 8th; routed experts only)
    _c("mmt01-cpu", "minimax-text-01", 0, "-c 8192"),
    _c("mmt01-1rpc-cmoe", "minimax-text-01", 1, "-c 8192 -ngl all -cmoe"),
    _c("mmt01-2rpc-ts13-ncmoe60-faoff", "minimax-text-01", 2, "-c 8192 -ngl all -ts 1,3 -ncmoe 60 -fa off"),
    _c("mmt01-3rpc-cmoe-np4-q8", "minimax-text-01", 3,
       "-c 16384 -ngl all -ts 1,1,1 -cmoe -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("mmt01-1rpc-ngl20-ub1024", "minimax-text-01", 1, "-c 8192 -ngl 20 -ub 1024"),
    _c("mm1-2rpc-cmoe-np2-ub256", "minimax-m1-40k", 2, "-c 16384 -ngl all -ts 1,1 -cmoe -np 2 -ub 256"),
    _c("mm1-cpu-faoff", "minimax-m1-40k", 0, "-c 4096 -fa off"),
    _c("talkie-cpu", "talkie-13b", 0, "-c 4096"),
    _c("talkie-2rpc-ngl20-faoff", "talkie-13b", 2, "-c 4096 -ngl 20 -ts 1,1 -fa off"),
    _c("talkie-3rpc-np2-q8", "talkie-13b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    # Spark 2.5 (SWA 3 of 4 from the file's pattern array, a per-head sigmoid gate before attn_output, GELU FFN)
    _c("spark-cpu", "spark2.5-8b", 0, "-c 16384"),
    _c("spark-1rpc-faoff", "spark2.5-8b", 1, "-c 16384 -ngl all -fa off"),
    _c("spark-2rpc-swafull-np2", "spark2.5-8b", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -np 2 -fa on"),
    _c("spark-3rpc-ngl20-q8-ub1024", "spark2.5-8b", 3,
       "-c 32768 -ngl 20 -ts 1,2,1 -fa on -ctk q8_0 -ctv q8_0 -ub 1024"),
    # PLM (DeepSeek-style compressed K/V projections into a plain cache, squared-ReLU FFN, tied head; llama.cpp
    # aborts on it with flash attention, tests/memory/test_flash_attn_rules.py)
    _c("plm-cpu-faoff", "plm-1.8b", 0, "-c 8192 -fa off"),
    _c("plm-2rpc-faoff-np2", "plm-1.8b", 2, "-c 4096 -ngl all -ts 1,1 -fa off -np 2"),
    _c("plm-1rpc-ngl20-faoff-ub1024", "plm-1.8b", 1, "-c 4096 -ngl 20 -fa off -ub 1024"),
    _c("plm-3rpc-faoff-np4", "plm-1.8b", 3, "-c 16384 -ngl all -ts 1,2,1 -fa off -np 4"),
    # OpenELM (per-layer head counts and FFN widths, fused qkv with per-head norms, the residual first in the adds)
    _c("oelm3-cpu", "openelm-3b", 0, "-c 2048"),
    _c("oelm3-2rpc-ngl20-faoff", "openelm-3b", 2, "-c 2048 -ngl 20 -ts 1,1 -fa off"),
    _c("oelm3-3rpc-np4-q8", "openelm-3b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("oelm1-1rpc-ub1024-faoff", "openelm-1.1b", 1, "-c 2048 -ngl all -ub 1024 -fa off"),
    # Jais (layer norms and biases everywhere, fused qkv, ALiBi) and Jais 2 (rope, a squared-ReLU FFN)
    _c("jais-cpu", "jais-13b", 0, "-c 2048"),
    _c("jais-2rpc-ngl20-faoff", "jais-13b", 2, "-c 2048 -ngl 20 -ts 1,1 -fa off"),
    _c("jais-3rpc-np2-q8", "jais-13b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("jais2-cpu-faoff", "jais2-8b", 0, "-c 8192 -fa off"),
    _c("jais2-2rpc-ub1024", "jais2-8b", 2, "-c 16384 -ngl all -ts 1,1 -ub 1024 -fa on"),
    _c("jais2-1rpc-ngl20-np4", "jais2-8b", 1, "-c 16384 -ngl 20 -np 4"),
    # Snowflake Arctic (a dense residual MLP in parallel with 128 softmax experts over the attention's input)
    _c("arctic-cpu", "arctic-480b", 0, "-c 4096"),
    _c("arctic-1rpc-cmoe", "arctic-480b", 1, "-c 4096 -ngl all -cmoe -fa on"),
    _c("arctic-3rpc-ncmoe-faoff-np2", "arctic-480b", 3, "-c 8192 -ngl all -ts 1,2,1 -ncmoe 20 -fa off -np 2"),
    _c("arctic-2rpc-cmoe-q8-ub1024", "arctic-480b", 2,
       "-c 4096 -ngl all -ts 1,1 -cmoe -fa on -ctk q8_0 -ctv q8_0 -ub 1024"),
    # BitNet b1.58 (sub-norms before the output and down projections, per-tensor scales, logits off token_embd)
    _c("bitnet-cpu", "bitnet-2b-4t", 0, "-c 4096"),
    _c("bitnet-1rpc-all-faoff", "bitnet-2b-4t", 1, "-c 4096 -ngl all -fa off"),
    _c("bitnet-2rpc-ngl20-np2-q8", "bitnet-2b-4t", 2, "-c 16384 -ngl 20 -ts 1,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("bitnet-3rpc-ub1024", "bitnet-2b-4t", 3, "-c 8192 -ngl all -ts 1,2,1 -ub 1024"),
    # Grok-1 / Grok-2 (flash attention always off, soft-capped KQ, attention-output norm, GELU experts, Grok-2's
    # dense FFN beside them, post-FFN norm, scaled and soft-capped logits; tests/memory/test_flash_attn_rules.py)
    _c("grok1-cpu", "grok-1", 0, "-c 8192"),
    _c("grok1-1rpc-cmoe-faoff", "grok-1", 1, "-c 8192 -ngl all -cmoe -fa off"),
    _c("grok1-3rpc-ncmoe-np2-q8", "grok-1", 3, "-c 16384 -ngl all -ts 1,2,1 -ncmoe 30 -np 2 -fa on -ctk q8_0"),
    _c("grok2-cpu-faoff", "grok-2", 0, "-c 8192 -fa off"),
    _c("grok2-2rpc-cmoe-ub1024", "grok-2", 2, "-c 16384 -ngl all -ts 1,1 -cmoe -ub 1024 -fa on"),
    _c("grok2-1rpc-ngl30-np4-faoff", "grok-2", 1, "-c 8192 -ngl 30 -np 4 -fa off"),
    # PaddleOCR-VL's text model (qwen2vl's M-RoPE graph on ERNIE 4.5's tensors)
    _c("pocr-cpu", "paddleocr-vl", 0, "-c 16384"),
    _c("pocr-2rpc-faoff-np2", "paddleocr-vl", 2, "-c 16384 -ngl all -ts 1,1 -fa off -np 2"),
    _c("pocr-1rpc-ngl10-ub1024", "paddleocr-vl", 1, "-c 32768 -ngl 10 -ub 1024 -fa on"),
    # Ling 1.x (bailingmoe: softmax experts on every layer plus gated shared experts)
    _c("ling1-lite-cpu", "ling-lite-1.5", 0, "-c 8192"),
    _c("ling1-lite-1rpc-cmoe", "ling-lite-1.5", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("ling1-lite-2rpc-ncmoe-faoff-np2", "ling-lite-1.5", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 10 -fa off -np 2"),
    _c("ling1-plus-3rpc-cmoe-q8", "ling-plus", 3, "-c 16384 -ngl all -ts 1,2,1 -cmoe -fa on -ctk q8_0 -ctv q8_0"),
    _c("ling1-plus-1rpc-ngl40-ub1024", "ling-plus", 1, "-c 8192 -ngl 40 -ub 1024"),
    # MiniCPM3 (low-rank Q and KV projections into a plain cache, LongRoPE factors per device, the muP scales)
    _c("mcpm3-cpu", "minicpm3-4b", 0, "-c 8192"),
    _c("mcpm3-2rpc-ngl30-faoff", "minicpm3-4b", 2, "-c 8192 -ngl 30 -ts 1,1 -fa off"),
    _c("mcpm3-3rpc-np2-q8", "minicpm3-4b", 3, "-c 32768 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("mcpm3-1rpc-long-ub1024", "minicpm3-4b", 1, "-c 65536 -ngl all -ub 1024 -fa on"),
    # Chameleon (per-head Q/K layer norms, swin norms on the 30B, the image-token range of the logits overwritten)
    _c("cham7-cpu", "chameleon-7b", 0, "-c 4096"),
    _c("cham7-2rpc-ngl20-faoff", "chameleon-7b", 2, "-c 4096 -ngl 20 -ts 1,1 -fa off"),
    _c("cham7-1rpc-np4-q8", "chameleon-7b", 1, "-c 16384 -ngl all -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("cham30-3rpc-ub1024", "chameleon-30b", 3, "-c 4096 -ngl all -ts 1,2,1 -ub 1024 -fa on"),
    _c("cham30-cpu-faoff", "chameleon-30b", 0, "-c 4096 -fa off"),
    # Granite SWA (SWA 3 of 4 from the pattern array, attention sinks, muP scales; the MoE's fused shared expert)
    _c("grswa-cpu", "granite-swa-8b", 0, "-c 16384"),
    _c("grswa-2rpc-faoff-np2", "granite-swa-8b", 2, "-c 16384 -ngl all -ts 1,1 -fa off -np 2"),
    _c("grswa-1rpc-ngl20-swafull", "granite-swa-8b", 1, "-c 32768 -ngl 20 --swa-full -fa on"),
    _c("grswamoe-cpu", "granite-swa-moe", 0, "-c 16384"),
    _c("grswamoe-1rpc-cmoe-q8", "granite-swa-moe", 1, "-c 32768 -ngl all -cmoe -fa on -ctk q8_0 -ctv q8_0"),
    _c("grswamoe-3rpc-ncmoe-ub1024", "granite-swa-moe", 3, "-c 16384 -ngl all -ts 1,2,1 -ncmoe 10 -ub 1024"),
    # CogVLM 2's language model (fused qkv, every token's logits: no inp_out_ids; visual-expert weights unused)
    _c("cogvlm-cpu", "cogvlm2-19b", 0, "-c 8192"),
    _c("cogvlm-2rpc-ngl20-faoff", "cogvlm2-19b", 2, "-c 8192 -ngl 20 -ts 1,1 -fa off"),
    _c("cogvlm-3rpc-np2-q8-ub1024", "cogvlm2-19b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0 -ub 1024"),
    # Laguna (SWA but every 4th layer from the first, a softplus gate per head or per element, sigmoid experts)
    _c("laguna-cpu", "laguna-moe", 0, "-c 16384"),
    _c("laguna-1rpc-cmoe", "laguna-moe", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("laguna-2rpc-ncmoe-faoff-np2", "laguna-moe", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 20 -fa off -np 2"),
    _c("laguna-2rpc-swafull-q8", "laguna-moe", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -fa on -ctk q8_0 -ctv q8_0"),
    _c("laguna-elem-3rpc-ub1024", "laguna-moe-elem", 3, "-c 16384 -ngl all -ts 1,2,1 -ub 1024"),
    _c("laguna-elem-cpu-faoff", "laguna-moe-elem", 0, "-c 8192 -fa off"),
    # Maple (SWA 3 of 4 from the pattern array, rope on the SWA layers only, q/k norms, softmax experts)
    _c("maple-cpu", "maple-moe", 0, "-c 16384"),
    _c("maple-1rpc-cmoe", "maple-moe", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("maple-2rpc-ncmoe-faoff-np2", "maple-moe", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 10 -fa off -np 2"),
    _c("maple-3rpc-swafull-q8", "maple-moe", 3, "-c 16384 -ngl all -ts 1,2,1 --swa-full -fa on -ctk q8_0 -ctv q8_0"),
    # PLaMo 1 (a parallel block: one norm feeds attention and FFN)
    _c("plamo-cpu", "plamo-13b", 0, "-c 4096"),
    _c("plamo-2rpc-ngl20-faoff", "plamo-13b", 2, "-c 4096 -ngl 20 -ts 1,1 -fa off"),
    _c("plamo-3rpc-np2-q8-ub1024", "plamo-13b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0 -ub 1024"),
    # PLaMo 3 (SWA 7 of 8, fused qkv with Q/K norms, post norms, a fused SwiGLU FFN)
    _c("plamo3-cpu", "plamo3-8b", 0, "-c 16384"),
    _c("plamo3-2rpc-faoff-np2", "plamo3-8b", 2, "-c 16384 -ngl all -ts 1,1 -fa off -np 2"),
    _c("plamo3-1rpc-ngl20-swafull", "plamo3-8b", 1, "-c 32768 -ngl 20 --swa-full -fa on"),
    _c("plamo3-3rpc-q8-ub1024", "plamo3-8b", 3, "-c 32768 -ngl all -ts 1,2,1 -fa on -ctk q8_0 -ctv q8_0 -ub 1024"),
    # DeepSeek-OCR's decoder (deepseek2's graph with plain attention, a dense first layer, softmax + shared experts)
    _c("dsocr-cpu", "deepseek-ocr", 0, "-c 8192"),
    _c("dsocr-1rpc-cmoe-faoff", "deepseek-ocr", 1, "-c 8192 -ngl all -cmoe -fa off"),
    _c("dsocr-2rpc-np4-ub1024", "deepseek-ocr", 2, "-c 32768 -ngl all -ts 1,1 -np 4 -ub 1024 -fa on"),
    # Mamba 1 and Falcon Mamba (the selective scan with one head per channel; Falcon's RMS-normed dt/B/C)
    _c("mamba1-cpu", "mamba-2.8b", 0, "-c 4096"),
    _c("mamba1-2rpc-np4", "mamba-2.8b", 2, "-c 8192 -ngl all -ts 1,1 -np 4"),
    _c("mamba1-1rpc-ngl40-np4-ub1024", "mamba-2.8b", 1, "-c 8192 -ngl 40 -np 4 -ub 1024"),
    _c("fmamba-cpu-np2", "falcon-mamba-7b", 0, "-c 4096 -np 2"),
    _c("fmamba-3rpc-np8", "falcon-mamba-7b", 3, "-c 16384 -ngl all -ts 1,2,1 -np 8"),
    # the diffusion decoders (no memory: non-causal attention over the ubatch alone, f16 casts for flash attention)
    _c("llada-cpu", "llada-8b", 0, "-c 4096"),
    _c("llada-1rpc-all-faoff", "llada-8b", 1, "-c 4096 -ngl all -fa off"),
    _c("llada-2rpc-ngl20-ub1024", "llada-8b", 2, "-c 8192 -ngl 20 -ts 1,1 -ub 1024"),
    _c("dream-cpu-faoff", "dream-7b", 0, "-c 8192 -fa off"),
    _c("dream-3rpc-ub1024", "dream-7b", 3, "-c 8192 -ngl all -ts 1,2,1 -ub 1024 -fa on"),
    _c("lladamoe-cpu", "llada-moe-7b", 0, "-c 4096"),
    _c("lladamoe-1rpc-cmoe-faoff", "llada-moe-7b", 1, "-c 8192 -ngl all -cmoe -fa off"),
    _c("rnd1-cpu", "rnd1-30b", 0, "-c 4096"),
    _c("rnd1-2rpc-ncmoe-ub1024", "rnd1-30b", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 20 -ub 1024"),
    # Muse Glimmer (rope on the SWA layers only, an element-wise sigmoid gate, bare post norms, scaled soft-capped
    # logits)
    _c("muse-cpu", "muse-glimmer-8b", 0, "-c 16384"),
    _c("muse-2rpc-faoff-np2", "muse-glimmer-8b", 2, "-c 16384 -ngl all -ts 1,1 -fa off -np 2"),
    _c("muse-1rpc-ngl20-swafull", "muse-glimmer-8b", 1, "-c 32768 -ngl 20 --swa-full -fa on"),
    _c("muse-3rpc-q8-ub1024", "muse-glimmer-8b", 3, "-c 32768 -ngl all -ts 1,2,1 -fa on -ctk q8_0 -ctv q8_0 -ub 1024"),
    # PLaMo 2 (Mamba layers of its own kind beside attention layers, post norms, a fused SwiGLU FFN)
    _c("plamo2-cpu", "plamo2-8b", 0, "-c 4096"),
    _c("plamo2-cpu-faoff-np4", "plamo2-8b", 0, "-c 4096 -fa off -np 4"),
    _c("plamo2-2rpc-np2", "plamo2-8b", 2, "-c 8192 -ngl all -ts 1,1 -np 2"),
    _c("plamo2-1rpc-ngl20-ub1024", "plamo2-8b", 1, "-c 8192 -ngl 20 -ub 1024"),
    _c("plamo2-3rpc-q8", "plamo2-8b", 3, "-c 16384 -ngl all -ts 1,2,1 -fa on -ctk q8_0 -ctv q8_0"),
    # Hunyuan dense and HunyuanOCR's text model (rope, then K and Q norms; XD-RoPE's 4 positions per token)
    _c("hy7-cpu", "hunyuan-7b", 0, "-c 8192"),
    _c("hy7-2rpc-ngl20-faoff", "hunyuan-7b", 2, "-c 16384 -ngl 20 -ts 1,1 -fa off"),
    _c("hy18-1rpc-np4-q8", "hunyuan-1.8b", 1, "-c 32768 -ngl all -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("hyocr-cpu-faoff", "hunyuan-ocr", 0, "-c 16384 -fa off"),
    _c("hyocr-2rpc-ub1024", "hunyuan-ocr", 2, "-c 32768 -ngl all -ts 1,1 -ub 1024 -fa on"),
    # Deci (NAS-pruned Llama, Nemotron Super 49B's shapes: layers without attention, with a linear layer in its
    # place, without an FFN; per-layer FFN widths)
    _c("deci-cpu", "nemotron-super-49b", 0, "-c 8192"),
    _c("deci-1rpc-ngl40", "nemotron-super-49b", 1, "-c 16384 -ngl 40 -fa on"),
    _c("deci-3rpc-np2-q8-faoff", "nemotron-super-49b", 3, "-c 16384 -ngl all -ts 1,2,1 -np 2 -fa off -ctk q8_0"),
    _c("deci-2rpc-ub1024", "nemotron-super-49b", 2, "-c 32768 -ngl all -ts 1,1 -ub 1024 -fa on"),
    # DBRX (the llama layer with layer norms, clamped fused qkv, 16 softmax experts of 10752)
    _c("dbrx-cpu", "dbrx-132b", 0, "-c 8192"),
    _c("dbrx-1rpc-cmoe", "dbrx-132b", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("dbrx-3rpc-ncmoe-faoff-np2", "dbrx-132b", 3, "-c 16384 -ngl all -ts 1,2,1 -ncmoe 20 -fa off -np 2"),
    # ChatGLM3 / GLM-4-9B (chatglm: glm4's layer without post norms; fused qkv with bias, fused gate/up, half rope)
    _c("glm49-cpu", "glm-4-9b-chat", 0, "-c 16384"),
    _c("glm49-2rpc-ngl20-faoff", "glm-4-9b-chat", 2, "-c 16384 -ngl 20 -ts 1,1 -fa off"),
    _c("glm49-3rpc-np4-q8", "glm-4-9b-chat", 3, "-c 65536 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("cglm3-1rpc-ub1024", "chatglm3-6b", 1, "-c 8192 -ngl all -ub 1024 -fa on"),
    # MiniCPM (granite's graph: the muP embedding/residual/logit scales, defaults when the file has no keys)
    _c("mcpm2-cpu", "minicpm-2b", 0, "-c 4096"),
    _c("mcpm2-2rpc-ngl20-faoff", "minicpm-2b", 2, "-c 4096 -ngl 20 -ts 1,1 -fa off"),
    _c("mcpm4-1rpc-np2-q8", "minicpm4-8b", 1, "-c 32768 -ngl all -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("mcpm4-3rpc-ngl20-ub1024", "minicpm4-8b", 3, "-c 16384 -ngl 20 -ts 1,2,1 -ub 1024 -fa on"),
    # CodeShell (the GPT-2 layer with rope), Nemotron / Minitron (layer norms with biases, relu-squared FFN) and OLMo 1
    # (the llama layer with parameter-free layer norms)
    _c("cshell-cpu", "codeshell-7b", 0, "-c 8192"),
    _c("cshell-2rpc-ngl20-faoff", "codeshell-7b", 2, "-c 8192 -ngl 20 -ts 1,1 -fa off"),
    _c("mini8-cpu", "minitron-8b", 0, "-c 4096"),
    _c("mini8-3rpc-np2-q8", "minitron-8b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("mini8-1rpc-ngl20-ub1024", "minitron-8b", 1, "-c 4096 -ngl 20 -ub 1024 -fa on"),
    _c("olmo7-cpu", "olmo-7b", 0, "-c 4096"),
    _c("olmo7-2rpc-faoff-np2", "olmo-7b", 2, "-c 4096 -ngl all -ts 1,1 -fa off -np 2"),
    # MPT and BLOOM (ALiBi: no rope; MPT-30B here with clamped Q/K/V; BLOOM's embedding norm) and GPT-NeoX / Pythia
    # (partial rope, parallel residual)
    _c("mpt7-cpu", "mpt-7b", 0, "-c 2048"),
    _c("mpt7-2rpc-ngl20-faoff", "mpt-7b", 2, "-c 4096 -ngl 20 -ts 1,1 -fa off"),
    _c("mpt30-3rpc-np2", "mpt-30b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 2 -fa on"),
    _c("bloom7-cpu", "bloomz-7b1", 0, "-c 2048"),
    _c("bloom7-1rpc-ngl20-q8", "bloomz-7b1", 1, "-c 4096 -ngl 20 -fa on -ctk q8_0 -ctv q8_0"),
    _c("pythia12-cpu-faoff", "pythia-12b", 0, "-c 2048 -fa off"),
    _c("pythia12-2rpc-ub1024", "pythia-12b", 2, "-c 4096 -ngl all -ts 1,1 -ub 1024 -fa on"),
    _c("neox20-3rpc-ngl30-np2", "gpt-neox-20b", 3, "-c 4096 -ngl 30 -ts 1,2,1 -np 2 -fa on"),
    # GPT-2 / StarCoder (learned position embeddings, no rope, layer norms and biases everywhere) and Falcon (parallel
    # block, fused qkv, one KV head on 7B, a second attention norm on 40B)
    _c("gpt2xl-cpu", "gpt2-xl", 0, "-c 1024"),
    _c("gpt2xl-2rpc-ngl30-faoff", "gpt2-xl", 2, "-c 1024 -ngl 30 -ts 1,1 -fa off"),
    _c("scb-cpu", "starcoderbase-15b", 0, "-c 8192"),
    _c("scb-3rpc-np2-q8", "starcoderbase-15b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("f7-cpu", "falcon-7b", 0, "-c 2048"),
    _c("f7-1rpc-ngl20-faoff", "falcon-7b", 1, "-c 8192 -ngl 20 -fa off"),
    _c("f40-2rpc-ub1024", "falcon-40b", 2, "-c 2048 -ngl all -ts 1,1 -ub 1024 -fa on"),
    _c("f40-3rpc-ngl40-np2-q8", "falcon-40b", 3, "-c 4096 -ngl 40 -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    # Phi-2 (phi2: parallel block, layer norms with biases, fused qkv with bias, partial rope, output bias) and
    # StableLM 2 (stablelm: layer norms with biases, partial rope; 12B per-head Q/K norms and a parallel residual)
    _c("phi2-cpu", "phi-2", 0, "-c 2048"),
    _c("phi2-2rpc-ngl20-faoff", "phi-2", 2, "-c 2048 -ngl 20 -ts 1,1 -fa off"),
    _c("phi2-1rpc-ngl16-np2-bf16", "phi-2", 1, "-c 4096 -ngl 16 -np 2 -fa on -ctk bf16 -ctv bf16"),  # q8_0: 32 does not divide 80
    _c("slm16-cpu", "stablelm-2-1.6b", 0, "-c 4096"),
    _c("slm16-1rpc-ub1024-faoff", "stablelm-2-1.6b", 1, "-c 4096 -ngl all -ub 1024 -fa off"),
    _c("slm12-cpu", "stablelm-2-12b", 0, "-c 4096"),
    _c("slm12-3rpc-ngl30-np2", "stablelm-2-12b", 3, "-c 8192 -ngl 30 -ts 1,2,1 -np 2 -fa on"),
    _c("slm12-2rpc-faoff-q8k", "stablelm-2-12b", 2, "-c 4096 -ngl all -ts 1,1 -fa off -ctk q8_0"),
    # the llama layer under other names: InternLM2.5, XVERSE, Qwen 1 (fused qkv with bias, FFN of n_ff / 2), Orion
    # (layer norms with biases), DeepSeek-MoE 16B (softmax experts + 2 shared, 1 dense leading layer)
    _c("il25-7b-cpu", "internlm2.5-7b", 0, "-c 16384"),
    _c("il25-7b-2rpc-ngl20-faoff", "internlm2.5-7b", 2, "-c 16384 -ngl 20 -ts 1,1 -fa off"),
    _c("il25-20b-3rpc-np2-q8", "internlm2.5-20b", 3, "-c 32768 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("xv13-1rpc-ub1024", "xverse-13b", 1, "-c 8192 -ngl all -ub 1024 -fa on"),
    _c("xv13-cpu-faoff", "xverse-13b", 0, "-c 4096 -fa off"),
    _c("qwen7-cpu", "qwen-7b", 0, "-c 8192"),
    _c("qwen7-2rpc-ngl20-np2", "qwen-7b", 2, "-c 8192 -ngl 20 -ts 1,1 -np 2 -fa on"),
    _c("orion-cpu", "orion-14b", 0, "-c 4096"),
    _c("orion-2rpc-faoff", "orion-14b", 2, "-c 4096 -ngl all -ts 1,1 -fa off"),
    _c("orion-1rpc-ngl20-q8", "orion-14b", 1, "-c 4096 -ngl 20 -fa on -ctk q8_0 -ctv q8_0"),
    _c("dsmoe-cpu", "deepseek-moe-16b", 0, "-c 4096"),
    _c("dsmoe-1rpc-cmoe", "deepseek-moe-16b", 1, "-c 4096 -ngl all -cmoe -fa on"),
    _c("dsmoe-2rpc-ncmoe-faoff", "deepseek-moe-16b", 2, "-c 4096 -ngl all -ts 1,1 -ncmoe 10 -fa off"),
    _c("dsmoe-3rpc-np4-ub1024", "deepseek-moe-16b", 3, "-c 16384 -ngl all -ts 1,2,1 -np 4 -ub 1024 -fa on"),
    # Gemma (gemma: scaled embeddings, Q scaled after rope, gated GELU FFN, the head always token_embd again)
    _c("gemma7b-cpu", "gemma-7b", 0, "-c 8192"),
    _c("gemma7b-2rpc-ngl20-faoff", "gemma-7b", 2, "-c 8192 -ngl 20 -ts 1,1 -fa off"),
    _c("gemma7b-3rpc-np2-q8", "gemma-7b", 3, "-c 8192 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("gemma2b-1rpc-ub1024", "gemma-2b", 1, "-c 8192 -ngl all -ub 1024 -fa on"),
    _c("gemma2b-cpu-faoff", "gemma-2b", 0, "-c 8192 -fa off"),
    # StarCoder2 (starcoder2: layer norms with biases, biases everywhere, GELU FFN without a gate; 3B ties its head)
    _c("sc2-3b-cpu", "starcoder2-3b", 0, "-c 16384"),
    _c("sc2-3b-1rpc-all-faoff", "starcoder2-3b", 1, "-c 8192 -ngl all -fa off"),
    _c("sc2-3b-2rpc-ngl20-np2-q8", "starcoder2-3b", 2, "-c 16384 -ngl 20 -ts 1,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("sc2-15b-cpu-faoff", "starcoder2-15b", 0, "-c 8192 -fa off"),
    _c("sc2-15b-3rpc-ub1024", "starcoder2-15b", 3, "-c 16384 -ngl all -ts 1,2,1 -ub 1024 -fa on"),
    _c("sc2-15b-1rpc-ngl30", "starcoder2-15b", 1, "-c 16384 -ngl 30 -fa on"),
    # Command R / R+ (command-r: parallel block, layer norms, rope on every layer over a plain cache; R+ per-head Q/K
    # layer norms) and Command R7B / Command A (cohere2: the same block, SWA 3:1 over 4096, NoPE global layers)
    _c("cmdr-cpu", "command-r-35b", 0, "-c 8192"),
    _c("cmdr-2rpc-ngl20-faoff", "command-r-35b", 2, "-c 16384 -ngl 20 -ts 1,1 -fa off"),
    _c("cmdr-3rpc-np2-q8", "command-r-35b", 3, "-c 32768 -ngl all -ts 1,2,1 -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("cmdrp-1rpc-ngl30-ub1024", "command-r-plus-104b", 1, "-c 8192 -ngl 30 -ub 1024 -fa on"),
    _c("cmdrp-cpu-faoff", "command-r-plus-104b", 0, "-c 4096 -fa off"),
    _c("r7b-cpu", "command-r7b", 0, "-c 8192"),
    _c("r7b-1rpc-all", "command-r7b", 1, "-c 32768 -ngl all -fa on"),
    _c("r7b-2rpc-ngl20-faoff-np2", "command-r7b", 2, "-c 16384 -ngl 20 -ts 1,1 -fa off -np 2"),
    _c("r7b-2rpc-swafull-q8", "command-r7b", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -ctk q8_0 -ctv q8_0"),
    _c("cmda-3rpc-ngl40-np4", "command-a-111b", 3, "-c 65536 -ngl 40 -ts 1,2,1 -np 4 -fa on"),
    _c("cmda-1rpc-ngl20-ub1024-faoff", "command-a-111b", 1, "-c 16384 -ngl 20 -ub 1024 -fa off"),
    # Step-3.5-Flash (step35: 64/96 query heads on full/sliding layers, SWA 3:1 over 512 tokens, half-head rope on
    # the full layers, head-wise attention gate, 3 dense leading blocks, sigmoid experts with selection bias + a
    # shared expert, 3 skipped MTP blocks; -rf: llama3 rope factors duplicated per device)
    _c("step35-cpu", "step-3.5-flash", 0, "-c 8192 -fa on"),
    _c("step35-1rpc-cmoe", "step-3.5-flash", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("step35-2rpc-ncmoe-faoff", "step-3.5-flash", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 20 -fa off"),
    _c("step35-3rpc-cmoe-np4-q8", "step-3.5-flash", 3, "-c 65536 -ngl all -ts 1,2,1 -cmoe -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("step35-1rpc-ngl20-ub1024", "step-3.5-flash", 1, "-c 16384 -ngl 20 -ub 1024 -fa on"),
    _c("step35rf-2rpc-cmoe-swafull-np2", "step-3.5-flash-rf", 2, "-c 16384 -ngl all -ts 1,1 -cmoe --swa-full -np 2"),
    # Hy3-preview (hy_v3: q/k norms before rope, 1 dense leading layer, 192 sigmoid experts with selection bias + a
    # shared expert; the MTP block's router and experts load without MTP, on the output device)
    _c("hy3-cpu", "hy3-preview", 0, "-c 8192"),
    _c("hy3-1rpc-cmoe", "hy3-preview", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("hy3-2rpc-ncmoe-faoff", "hy3-preview", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 40 -fa off"),
    _c("hy3-3rpc-cmoe-np4-q8", "hy3-preview", 3, "-c 65536 -ngl all -ts 1,2,1 -cmoe -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("hy3-1rpc-ngl30-ub1024", "hy3-preview", 1, "-c 16384 -ngl 30 -ub 1024 -fa on"),
    # step35 cases here
    # RWKV-7 "Goose" / G1 (rwkv7: every layer recurrent, no KV; state per sequence = 2 token shifts + the WKV
    # matrices, n_embd x (2 + 64) f32 a layer; LN0 on layer 0's device)
    _c("rwkv7-29-cpu", "rwkv7-g1-2.9b", 0, "-c 4096"),
    _c("rwkv7-29-2rpc-np4", "rwkv7-g1-2.9b", 2, "-c 16384 -ngl all -ts 1,1 -np 4"),
    _c("rwkv7-72-1rpc-ngl20-np2", "rwkv7-g1-7.2b", 1, "-c 8192 -ngl 20 -np 2 -fa off"),
    _c("rwkv7-72-3rpc-ub1024-np2", "rwkv7-g1-7.2b", 3, "-c 8192 -ngl all -ts 1,1,2 -np 2 -ub 1024"),
    _c("rwkv7-15-2rpc-ts31-np8", "rwkv7-1.5b-world", 2, "-c 32768 -ngl all -ts 3,1 -np 8"),
    _c("rwkv7-15-1rpc-ngl12-np4", "rwkv7-1.5b-world", 1, "-c 4096 -ngl 12 -np 4 -ub 256"),
    # ARWKV-7 (arwkv7: Qwen2.5 with RWKV-7 time mixing; RMS norms, one token shift, SwiGLU FFN, no LN0)
    _c("arwkv7-7b-cpu", "arwkv-7b-preview", 0, "-c 4096"),
    _c("arwkv7-7b-2rpc-np2-faoff", "arwkv-7b-preview", 2, "-c 16384 -ngl all -ts 1,1 -np 2 -fa off"),
    _c("arwkv7-7b-1rpc-ngl16-np2", "arwkv-7b-preview", 1, "-c 8192 -ngl 16 -np 2"),
    _c("arwkv7-15-3rpc-np8-ub1024", "arwkv-r1-1.5b", 3, "-c 16384 -ngl all -ts 1,1,1 -np 8 -ub 1024"),
    _c("arwkv7-15-2rpc-ts13-np8-ub1024", "arwkv-r1-1.5b", 2, "-c 8192 -ngl all -ts 1,3 -np 8 -ub 1024"),
    # RWKV-6 "Finch" World (rwkv6: RWKV-7's frame around RWKV-6's data-dependent lerp, WKV6 and gated mixes;
    # the output halved every 6 layers)
    _c("rwkv6-3b-cpu", "rwkv6-finch-3b", 0, "-c 4096"),
    _c("rwkv6-7b-2rpc-np2", "rwkv6-finch-7b", 2, "-c 8192 -ngl all -ts 1,1 -np 2"),
    _c("rwkv6-7b-1rpc-ngl20-np2-faoff", "rwkv6-finch-7b", 1, "-c 8192 -ngl 20 -np 2 -fa off"),
    _c("rwkv6-3b-3rpc-np4-ub1024", "rwkv6-finch-3b", 3, "-c 16384 -ngl all -ts 1,2,1 -np 4 -ub 1024"),
    # QRWKV6 (rwkv6qwen2: Qwen2.5 with RWKV-6 time mixing in its QRWKV form: GATED_LINEAR_ATTN, GQA-repeated k/v,
    # q/k/v biases, no group norm; ARWKV-7's frame: RMS norms, one token shift, SwiGLU FFN)
    _c("qrwkv6-7b-cpu", "qrwkv6-7b", 0, "-c 4096"),
    _c("qrwkv6-32b-2rpc-np2", "qrwkv6-32b", 2, "-c 8192 -ngl all -ts 1,1 -np 2"),
    _c("qrwkv6-32b-1rpc-ngl30-np2-faoff", "qrwkv6-32b", 1, "-c 8192 -ngl 30 -np 2 -fa off"),
    _c("qrwkv6-7b-3rpc-ts121-np4-ub1024", "qrwkv6-7b", 3, "-c 16384 -ngl all -ts 1,2,1 -np 4 -ub 1024"),
    # Ling 3.0 (bailingmoe3: Kimi delta attention layers, absorbed-MLA layers with a per-head gate over a K-only
    # cache, sigmoid-routed experts + shared; hyperparameters beyond size/width/experts unconfirmed)
    _c("ling3-tiny-cpu", "ling-3.0-tiny", 0, "-c 4096"),
    _c("ling3-tiny-1rpc-np2-faoff", "ling-3.0-tiny", 1, "-c 16384 -ngl all -np 2 -fa off"),
    _c("ling3-tiny-2rpc-ts13-ncmoe6", "ling-3.0-tiny", 2, "-c 32768 -ngl all -ts 1,3 -ncmoe 6"),
    _c("ling3-tiny-1rpc-ngl10-ub1024", "ling-3.0-tiny", 1, "-c 8192 -ngl 10 -ub 1024"),
    _c("ling3mtp-tiny-cpu", "ling-3.0-tiny-mtp", 0, "-c 16384"),
    _c("ling3mtp-tiny-2rpc-ts13", "ling-3.0-tiny-mtp", 2, "-c 32768 -ngl all -ts 1,3 -np 2"),
    _c("ling3mtp-tiny-1rpc-ngl12", "ling-3.0-tiny-mtp", 1, "-c 16384 -ngl 12 -fa off"),
    _c("ling3-flash-3rpc-np4", "ling-3.0-flash", 3, "-c 16384 -ngl all -ts 1,1,1 -np 4"),
    _c("ling3-flash-2rpc-cmoe-q8", "ling-3.0-flash", 2, "-c 8192 -ngl all -ts 1,1 -cmoe -ctk q8_0 -ctv q8_0"),
    # Kimi-Linear (kimi-linear: Kimi delta attention layers, absorbed MLA without RoPE over a K-only cache on
    # every 4th layer and the last, sigmoid-routed experts + one shared; the prompt graph reserved for one sequence)
    _c("kimilinear-cpu", "kimi-linear-48b-a3b", 0, "-c 4096"),
    _c("kimilinear-1rpc-ngl14-np2-faoff", "kimi-linear-48b-a3b", 1, "-c 16384 -ngl 14 -np 2 -fa off"),
    _c("kimilinear-2rpc-ts13-cmoe", "kimi-linear-48b-a3b", 2, "-c 32768 -ngl all -ts 1,3 -cmoe"),
    _c("kimilinear-3rpc-np4-ub1024", "kimi-linear-48b-a3b", 3, "-c 16384 -ngl all -ts 1,1,1 -np 4 -ub 1024"),
    _c("kimilinear-cpu-np8-ub64", "kimi-linear-48b-a3b", 0, "-c 8192 -np 8 -ub 64"),
    _c("kimilinear-1rpc-np8-ub32-faoff", "kimi-linear-48b-a3b", 1, "-c 8192 -ngl all -np 8 -ub 32 -fa off"),
    # GLM5-Next (glm5-next: KDA layers and nope-only MLA with a k-pool DSA indexer inside 4-stream hyper-connections;
    # the fused hc post is turned off where the scheduler puts it on the next layer's device: -ngl partial)
    _c("g5n-cpu", "glm-5.3-flash", 0, "-c 4096"),
    _c("g5n-1rpc-ngl20-np2-faoff", "glm-5.3-flash", 1, "-c 16384 -ngl 20 -np 2 -fa off"),
    _c("g5n-2rpc-ts13-cmoe", "glm-5.3-flash", 2, "-c 32768 -ngl all -ts 1,3 -cmoe"),
    _c("g5n-3rpc-np4-ub1024", "glm-5.3-flash", 3, "-c 16384 -ngl all -ts 1,1,1 -np 4 -ub 1024"),
    _c("g5n-cpu-np8-ub64", "glm-5.3-flash", 0, "-c 8192 -np 8 -ub 64"),
    _c("g5n-1rpc-ngl30-np8-ub32-faoff", "glm-5.3-flash", 1, "-c 8192 -ngl 30 -np 8 -ub 32 -fa off"),
    _c("g5n-2rpc-ncmoe-q8", "glm-5.3-flash", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 10 -ctk q8_0 -ctv q8_0"),
    _c("g5n-1rpc-ngl30-ub16", "glm-5.3-flash", 1, "-c 8192 -ngl 30 -ub 16"),
    # Kimi K3 (kimi-k3: kimi-linear's KDA + MLA hybrid with attention residuals, a growing checkpoint stack mixed
    # by DSV4_HC_PRE, the situ activation, q-LoRA MLA with an output gate, a latent MoE of 896 experts)
    _c("kimik3-cpu", "kimi-k3", 0, "-c 4096"),
    _c("kimik3-1rpc-ngl30-np2-faoff", "kimi-k3", 1, "-c 16384 -ngl 30 -np 2 -fa off"),
    _c("kimik3-2rpc-ts13-cmoe", "kimi-k3", 2, "-c 32768 -ngl all -ts 1,3 -cmoe"),
    _c("kimik3-3rpc-np4-ub1024", "kimi-k3", 3, "-c 16384 -ngl all -ts 1,1,1 -np 4 -ub 1024"),
    _c("kimik3-cpu-np8-ub64-q8", "kimi-k3", 0, "-c 8192 -np 8 -ub 64 -ctk q8_0 -ctv q8_0"),
    _c("kimik3-1rpc-ncmoe40-np8-ub32-faoff", "kimi-k3", 1, "-c 8192 -ngl all -ncmoe 40 -np 8 -ub 32 -fa off"),
    # MiniMax-M3 (minimax-m3: MiniMax-M2 attention, leading dense layers, routed + shared experts, MSA block-sparse
    # attention with its own indexer cache on the MoE layers; dense attention with -fa off or a unified -np cache)
    _c("mm3-cpu", "minimax-m3", 0, "-c 4096"),
    _c("mm3-1rpc-cmoe", "minimax-m3", 1, "-c 16384 -ngl all -cmoe"),
    _c("mm3-2rpc-ngl30-ts13", "minimax-m3", 2, "-c 8192 -ngl 30 -ts 1,3 -cmoe"),
    _c("mm3-3rpc-np4-ub1024", "minimax-m3", 3, "-c 16384 -ngl all -ts 1,1,1 -cmoe -np 4 -ub 1024"),
    _c("mm3-1rpc-ncmoe-np2-faoff", "minimax-m3", 1, "-c 8192 -ngl all -ncmoe 40 -np 2 -fa off"),
    _c("mm3-2rpc-cmoe-q8-ub256", "minimax-m3", 2, "-c 32768 -ngl all -ts 1,1 -cmoe -ctk q8_0 -ctv q8_0 -ub 256"),
    # rwkv7 cases here
    # DeepSeek-V3.2 (deepseek32: V3's MLA + MoE with the DSA lightning indexer, its own K cache of 128 per layer
    # and the top-2048 mask)
    _c("dsv32-cpu", "deepseek-v3.2", 0, "-c 4096 -fa on"),
    _c("dsv32-1rpc-cmoe", "deepseek-v3.2", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("dsv32-2rpc-cmoe-faoff", "deepseek-v3.2", 2, "-c 4096 -ngl all -ts 1,1 -cmoe -fa off"),
    _c("dsv32-1rpc-cmoe-q8", "deepseek-v3.2", 1, "-c 32768 -ngl all -cmoe -fa on -ctk q8_0 -ctv q8_0"),
    _c("dsv32-3rpc-cmoe-np2", "deepseek-v3.2", 3, "-c 16384 -ngl all -ts 1,2,1 -cmoe -np 2 -fa on"),
    _c("dsv32-2rpc-ngl30-ub1024", "deepseek-v3.2", 2, "-c 8192 -ngl 30 -ts 1,1 -cmoe -ub 1024 -fa on"),
    _c("dsv32-1rpc-ncmoe-np4-faoff", "deepseek-v3.2", 1, "-c 8192 -ngl all -ncmoe 50 -np 4 -fa off"),
    _c("dsv32-1rpc-cmoe-nkvo-ub256", "deepseek-v3.2", 1, "-c 8192 -ngl all -cmoe -nkvo -ub 256 -fa on"),
    # GLM-5 (glm-dsa: DeepSeek-V3.2's graph and caches, every layer running its indexer)
    _c("glm5-cpu-faoff", "glm-5", 0, "-c 8192 -fa off"),
    _c("glm5-1rpc-cmoe", "glm-5", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("glm5-2rpc-cmoe-q8-np2", "glm-5", 2, "-c 16384 -ngl all -ts 1,1 -cmoe -np 2 -fa on -ctk q8_0 -ctv q8_0"),
    _c("glm5-3rpc-ngl40-ub1024", "glm-5", 3, "-c 8192 -ngl 40 -ts 1,2,1 -cmoe -ub 1024 -fa on"),
    _c("glm5-1rpc-ncmoe-np4-faoff", "glm-5", 1, "-c 8192 -ngl all -ncmoe 60 -np 4 -fa off"),
    # deepseek32 cases here
    # Hy4-preview (hy_v4: absorbed MLA with a sink per head and a sigmoid output gate inside 4-stream hyper-
    # connections; DSA on every 4th layer's indexer, the others reuse its top-k) and its all-full-attention form
    _c("hy4-cpu", "hy4-preview", 0, "-c 4096 -fa on"),
    _c("hy4-1rpc-cmoe-faoff", "hy4-preview", 1, "-c 16384 -ngl all -cmoe -fa off"),
    _c("hy4-2rpc-cmoe-q8-np2", "hy4-preview", 2, "-c 16384 -ngl all -ts 1,1 -cmoe -np 2 -ctk q8_0 -ctv q8_0"),
    _c("hy4-3rpc-ngl40-ub1024", "hy4-preview", 3, "-c 8192 -ngl 40 -ts 1,2,1 -cmoe -ub 1024"),
    _c("hy4fa-1rpc-ncmoe-np4-faoff", "hy4-preview-full-attn", 1, "-c 8192 -ngl all -ncmoe 60 -np 4 -fa off"),
    _c("hy4fa-2rpc-cmoe-ts13-ub256-q8", "hy4-preview-full-attn", 2,
       "-c 32768 -ngl all -ts 1,3 -cmoe -ub 256 -ctk q8_0 -ctv q8_0"),
    _c("hy4-2rpc-ngl20-ts31-ncmoe-np3-faoff", "hy4-preview", 2, "-c 65536 -ngl 20 -ts 3,1 -ncmoe 70 -fa off -np 3"),
    _c("hy4fa-3rpc-cmoe-q4-ub1024", "hy4-preview-full-attn", 3,
       "-c 16384 -ngl all -ts 1,1,1 -cmoe -ctk q4_0 -ctv q4_0 -ub 1024"),
    # K-EXAONE (exaone-moe: SWA 3:1 over 128 tokens, rope on sliding layers only, 1 dense leading block, sigmoid
    # experts with selection bias + a shared expert, 1 skipped NextN block)
    _c("kex-cpu", "k-exaone-236b-a23b", 0, "-c 8192 -fa on"),
    _c("kex-1rpc-cmoe", "k-exaone-236b-a23b", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("kex-2rpc-ncmoe-faoff", "k-exaone-236b-a23b", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 20 -fa off"),
    _c("kex-3rpc-cmoe-np4-q8", "k-exaone-236b-a23b", 3, "-c 65536 -ngl all -ts 1,2,1 -cmoe -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("kex-1rpc-ngl20-ub1024", "k-exaone-236b-a23b", 1, "-c 16384 -ngl 20 -ub 1024 -fa on"),
    _c("kex-2rpc-cmoe-swafull-np2", "k-exaone-236b-a23b", 2, "-c 16384 -ngl all -ts 1,1 -cmoe --swa-full -np 2"),
    # SmallThinker 21B-A3B (router on the layer input, ReGLU experts, SWA 4096 on 3 of 4 layers with NoPE full
    # layers) and 4B-A0.6B (no window, sigmoid router, tied embeddings)
    _c("st21-cpu", "smallthinker-21b-a3b", 0, "-c 8192"),
    _c("st21-1rpc-cmoe", "smallthinker-21b-a3b", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("st21-2rpc-ncmoe-faoff", "smallthinker-21b-a3b", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 20 -fa off"),
    _c("st21-3rpc-np4-q8", "smallthinker-21b-a3b", 3, "-c 32768 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("st21-2rpc-swafull-cmoe", "smallthinker-21b-a3b", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -cmoe"),
    _c("st21-1rpc-ngl30-ub1024", "smallthinker-21b-a3b", 1, "-c 16384 -ngl 30 -ub 1024 -fa off"),
    _c("st4-cpu-faoff", "smallthinker-4b-a0.6b", 0, "-c 16384 -fa off"),
    _c("st4-2rpc-ncmoe", "smallthinker-4b-a0.6b", 2, "-c 32768 -ngl all -ts 1,1 -ncmoe 10 -fa on"),
    _c("st4-1rpc-np2", "smallthinker-4b-a0.6b", 1, "-c 16384 -ngl all -np 2 -fa off"),
    # GroveMoE-Inst (Qwen3-30B-A3B's layers + 64 adjugate experts chained on the routed experts' output)
    _c("grove-cpu", "grovemoe-inst", 0, "-c 8192"),
    _c("grove-1rpc-cmoe", "grovemoe-inst", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("grove-2rpc-ncmoe-faoff", "grovemoe-inst", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 20 -fa off"),
    _c("grove-3rpc-np4-q8", "grovemoe-inst", 3, "-c 32768 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("grove-1rpc-ngl30-ub1024", "grovemoe-inst", 1, "-c 16384 -ngl 30 -ub 1024 -fa off"),
    _c("grove-1rpc-ot-chexps", "grovemoe-inst", 1, r"-c 8192 -ngl all -ot blk\.(1[0-9]|2[0-3])\.ffn_(up|gate|down)_chexps=CPU"),
    # Trinity Mini (afmoe: MuP-scaled embeddings, gated attention, SWA 3:1 over 2048 tokens, no rope on the global
    # layers, sandwich norms, 2 dense leading blocks, sigmoid experts with selection bias + a shared expert)
    _c("trin-cpu", "trinity-mini", 0, "-c 16384 -fa on"),
    _c("trin-1rpc-cmoe", "trinity-mini", 1, "-c 65536 -ngl all -cmoe -fa on"),
    _c("trin-2rpc-ncmoe-faoff", "trinity-mini", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 12 -fa off"),
    _c("trin-3rpc-cmoe-np4-q8", "trinity-mini", 3, "-c 65536 -ngl all -ts 1,2,1 -cmoe -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    # placements where a graph cut to representative layers differed from the whole graph (a sweep of every sparse
    # model on 3 RPC devices): the estimate replays every layer, so these hold llama.cpp's figures
    _c("phi4mini-3rpc-ngl30-ub1024", "phi-4-mini", 3, "-c 8192 -ngl 30 -ts 1,1,1 -ub 1024"),
    _c("phi4-3rpc-ncmoe-np2", "phi-4", 3, "-c 32768 -ngl all -ts 2,1,1 -np 2 -ncmoe 10"),
    _c("smol-3rpc-ngl30-ub1024", "smollm3-3b", 3, "-c 8192 -ngl 30 -ts 1,1,1 -ub 1024"),
    _c("g4-31b-3rpc-cmoe-np4-q8", "gemma-4-31b", 3, "-c 65536 -ngl all -ts 1,2,1 -cmoe -np 4 -ctk q8_0 -ctv q8_0"),
    _c("mm3-3rpc-ts211-ncmoe-np2", "minimax-m3", 3, "-c 32768 -ngl all -ts 2,1,1 -np 2 -ncmoe 10"),
    _c("mm3-3rpc-ngl30-ub1024", "minimax-m3", 3, "-c 8192 -ngl 30 -ts 1,1,1 -ub 1024"),
    _c("trin-1rpc-ngl16-ub1024", "trinity-mini", 1, "-c 32768 -ngl 16 -ub 1024 -fa on"),
    _c("trin-2rpc-swafull-np2", "trinity-mini", 2, "-c 16384 -ngl all -ts 1,1 --swa-full -np 2"),
    # ERNIE 4.5 MoE (1 dense leading block, selection bias, shared expert)
    _c("ernie-1rpc-cmoe", "ernie-4.5-21b-a3b", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("ernie-2rpc-ncmoe", "ernie-4.5-21b-a3b", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 10 -fa off"),
    _c("ernie-cpu", "ernie-4.5-21b-a3b", 0, "-c 4096"),
    # Hunyuan-A13B (experts + shared MLP on every layer, q/k norms after rope)
    _c("hy-1rpc-cmoe", "hunyuan-a13b", 1, "-c 32768 -ngl all -cmoe -fa on"),
    _c("hy-2rpc-ncmoe-faoff", "hunyuan-a13b", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 12 -fa off"),
    # GLM-4-32B-0414 (post norms, single-tensor SwiGLU, 2 KV heads)
    _c("glm4-2rpc", "glm-4-32b-0414", 2, "-c 32768 -ngl all -ts 1,1 -fa on"),
    _c("glm4-1rpc-ngl30-faoff", "glm-4-32b-0414", 1, "-c 8192 -ngl 30 -fa off"),
    # EXAONE 4.0: the 32B slides on 3 of 4 layers (window 4096) with rope only there; the 1.2B does not slide
    _c("ex32-2rpc", "exaone-4.0-32b", 2, "-c 32768 -ngl all -ts 1,1 -fa on"),
    _c("ex32-1rpc-ngl40-faoff", "exaone-4.0-32b", 1, "-c 16384 -ngl 40 -fa off"),
    _c("ex32-2rpc-swafull", "exaone-4.0-32b", 2, "-c 16384 -ngl all -ts 1,2 --swa-full"),
    _c("ex1-1rpc", "exaone-4.0-1.2b", 1, "-c 65536 -ngl all -np 2 -fa on"),
    _c("goss-2rpc-pipeline", "gpt-oss-120b", 2, "-c 8192 -ngl all -ts 1,1 -fa off"),
    _c("q30-cpu-np3-nokvu", "qwen3-30b-a3b", 0, "-c 12288 -np 3 -fa off"),
    # Qwen3.5 / Qwen3-Next hybrids: gated delta-net layers (recurrent state per sequence, no KV) with full attention
    # every 4th layer (KV); the dense 27B carries an MTP block (left out, as without --spec-type draft-mtp)
    _c("q35-27b-cpu", "qwen3.5-27b", 0, "-c 4096"),
    _c("q35-27b-1rpc", "qwen3.5-27b", 1, "-c 8192 -ngl all -fa on"),
    _c("q35-27b-2rpc-faoff", "qwen3.5-27b", 2, "-c 16384 -ngl all -ts 1,1 -fa off"),
    _c("q35-27b-2rpc-np4", "qwen3.5-27b", 2, "-c 16384 -ngl all -ts 3,1 -np 4 -fa on"),
    _c("q35-27b-1rpc-ngl30-q8", "qwen3.5-27b", 1, "-c 32768 -ngl 30 -fa on -ctk q8_0 -ctv q8_0"),
    _c("q35-27b-2rpc-np2-ub256", "qwen3.5-27b", 2, "-c 8192 -ngl all -ts 1,2 -np 2 -fa off -ub 256"),
    _c("q35-27b-cpu-np3", "qwen3.5-27b", 0, "-c 16384 -np 3 -fa off"),
    _c("q35-35b-cpu", "qwen3.5-35b-a3b", 0, "-c 4096"),
    _c("q35-35b-1rpc-cmoe", "qwen3.5-35b-a3b", 1, "-c 16384 -ngl all -cmoe -fa on"),
    _c("q35-35b-2rpc-ncmoe", "qwen3.5-35b-a3b", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 10 -fa off"),
    _c("q35-35b-2rpc-np4-q8", "qwen3.5-35b-a3b", 2, "-c 32768 -ngl all -ts 2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("q35-35b-1rpc-ngl20-np2", "qwen3.5-35b-a3b", 1, "-c 8192 -ngl 20 -fa off -np 2"),
    _c("q35-35b-1rpc-ncmoe32", "qwen3.5-35b-a3b", 1, "-c 8192 -ngl all -ncmoe 32 -fa on"),
    _c("qnext-cpu", "qwen3-next-80b-a3b", 0, "-c 4096"),
    _c("qnext-2rpc-cmoe-np2", "qwen3-next-80b-a3b", 2, "-c 16384 -ngl all -ts 1,1 -cmoe -fa off -np 2"),
    _c("qnext-1rpc-ncmoe40", "qwen3-next-80b-a3b", 1, "-c 8192 -ngl all -ncmoe 40 -fa on"),
    _c("qnext-cpu-np4-q8", "qwen3-next-80b-a3b", 0, "-c 8192 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("qnext-ssmin-2rpc-np2", "qwen3-next-80b-a3b-ssm-in", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 40 -fa on -np 2"),
    # Phi-3.5-MoE (the phi3 graph: biased norms and projections, LongRoPE factors read from each device's copy)
    _c("phimoe-cpu", "phi-3.5-moe", 0, "-c 4096"),
    _c("phimoe-1rpc", "phi-3.5-moe", 1, "-c 8192 -ngl all -fa on"),
    _c("phimoe-2rpc-ncmoe-faoff", "phi-3.5-moe", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 5 -fa off"),
    _c("phimoe-3rpc-cmoe-q8", "phi-3.5-moe", 3, "-c 32768 -ngl all -ts 1,2,1 -cmoe -fa on -ctk q8_0 -ctv q8_0"),
    _c("phimoe-2rpc-ngl20-np4", "phi-3.5-moe", 2, "-c 16384 -ngl 20 -ts 1,1 -np 4 -fa off"),
    _c("phimoe-1rpc-nkvo-ub256", "phi-3.5-moe", 1, "-c 16384 -ngl all -nkvo -fa off -ub 256"),
    # dots.llm1 (q/k norms, dense first layer, sigmoid experts with selection bias + 2 shared experts)
    _c("dots1-cpu", "dots.llm1", 0, "-c 4096"),
    _c("dots1-2rpc-cmoe", "dots.llm1", 2, "-c 8192 -ngl all -ts 1,1 -cmoe -fa on"),
    _c("dots1-1rpc-cmoe-faoff", "dots.llm1", 1, "-c 16384 -ngl all -cmoe -fa off"),
    _c("dots1-3rpc-ncmoe40-np2", "dots.llm1", 3, "-c 8192 -ngl all -ts 1,1,1 -ncmoe 40 -fa on -np 2"),
    _c("dots1-2rpc-ngl30-q8", "dots.llm1", 2, "-c 32768 -ngl 30 -ts 2,1 -cmoe -ctk q8_0 -ctv q8_0 -fa on"),
    _c("dots1-1rpc-ot-ub256", "dots.llm1", 1,
       r"-c 4096 -ngl all -ot blk\.(1[0-9]|[2-5][0-9]|6[01])\.ffn_(up|gate|down)_exps=CPU -ub 256"),
    # Ling 2.0 (bailingmoe2: fused qkv, rope on half the head, grouped sigmoid experts + shared, NextN skipped)
    _c("ling-mini-cpu", "ling-mini-2.0", 0, "-c 4096"),
    _c("ling-mini-1rpc", "ling-mini-2.0", 1, "-c 8192 -ngl all -fa on"),
    _c("ling-mini-2rpc-ncmoe-faoff", "ling-mini-2.0", 2, "-c 8192 -ngl all -ts 1,1 -ncmoe 5 -fa off"),
    _c("ling-mini-3rpc-np4-q8", "ling-mini-2.0", 3, "-c 32768 -ngl all -ts 1,1,2 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("ling-mini-1rpc-ngl12-ub1024", "ling-mini-2.0", 1, "-c 16384 -ngl 12 -fa off -ub 1024"),
    _c("ling-flash-cpu-faoff", "ling-flash-2.0", 0, "-c 4096 -fa off"),
    _c("ling-flash-2rpc-cmoe", "ling-flash-2.0", 2, "-c 16384 -ngl all -ts 1,1 -cmoe -fa on"),
    _c("ling-flash-1rpc-ncmoe20-np2", "ling-flash-2.0", 1, "-c 8192 -ngl all -ncmoe 20 -np 2"),
    # LFM2 hybrids: short-conv layers (a conv state per sequence, no KV) with attention on 6 of 16 / 24 layers
    _c("lfm2-cpu", "lfm2-1.2b", 0, "-c 4096"),
    _c("lfm2-1rpc", "lfm2-1.2b", 1, "-c 8192 -ngl all -fa on"),
    _c("lfm2-2rpc-np2-faoff", "lfm2-1.2b", 2, "-c 8192 -ngl all -ts 1,1 -fa off -np 2"),
    _c("lfm2-3rpc-np4-q8", "lfm2-1.2b", 3, "-c 32768 -ngl all -ts 1,2,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("lfm2-1rpc-ngl9-ub256", "lfm2-1.2b", 1, "-c 16384 -ngl 9 -fa off -ub 256"),
    _c("lfm2-2rpc-long-ub1024", "lfm2-1.2b", 2, "-c 65536 -ngl all -ts 3,1 -fa on -ub 1024"),
    _c("lfm2moe-cpu", "lfm2-8b-a1b", 0, "-c 4096"),
    _c("lfm2moe-1rpc-cmoe", "lfm2-8b-a1b", 1, "-c 8192 -ngl all -cmoe -fa on"),
    _c("lfm2moe-2rpc-ncmoe-np2", "lfm2-8b-a1b", 2, "-c 16384 -ngl all -ts 1,1 -ncmoe 10 -fa off -np 2"),
    _c("lfm2moe-3rpc-np4-q8", "lfm2-8b-a1b", 3, "-c 32768 -ngl all -ts 1,1,1 -np 4 -fa on -ctk q8_0 -ctv q8_0"),
    _c("lfm2moe-1rpc-ngl12", "lfm2-8b-a1b", 1, "-c 8192 -ngl 12 -fa off"),
    # -fa auto where a CPU layer's attention sits next to offloaded layers: resolve_fused_ops finds its
    # FLASH_ATTN_EXT off the layer's device and turns flash attention off for the whole context (the KV cache keeps
    # its untransposed V); unmodelled, lfm2 gave RPC0 76 / CPU 68 MiB against 556 / 548 (Jamba -ngl 4 -cmoe: 144 / 200
    # against 584 / 576)
    _c("lfm2-2rpc-ngl8-ts31-faauto", "lfm2-1.2b", 2, "-c 8192 -ngl 8 -ts 3,1"),
    _c("jamba-2rpc-ngl12-cmoe-np5-faauto", "jamba-mini-1.7", 2, "-c 16384 -ngl 12 -ts 1,1 -cmoe -np 5"),
]


def list_rpc_devices(server: Path, endpoints: list[str]) -> list[Lane]:
    """RPC devices as llama.cpp reports them (name, buffer type, free/total)."""
    if not endpoints:
        return []
    out = subprocess.run([str(server), "--rpc", ",".join(endpoints), "--list-devices"], capture_output=True,
                         text=True, timeout=60).stdout
    devs = []
    local_index: dict[str, int] = {}
    for m in re.finditer(r"^\s+(RPC\d+): (\S+) \((\d+) MiB, (\d+) MiB free\)", out, re.M):
        name, endpoint, total, free = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        j = local_index.get(endpoint, 0)
        local_index[endpoint] = j + 1
        devs.append(Lane(name, f"RPC{j}[{endpoint}]", free * MiB, total * MiB, "rpc"))
    return devs


@dataclass
class Result:
    case: Case
    ours: Estimate
    theirs: list[FitRow]


def run_case(case: Case, model_path: Path, bin_dir: Path, endpoints: list[str]) -> Result:
    rpc = ["--rpc", ",".join(endpoints[: case.n_rpc])] if case.n_rpc else []
    args = [*rpc, *case.args, "--no-repack"]
    theirs = run_fit_print(model_path, args, llama_dir=bin_dir)
    devices = list_rpc_devices(bin_dir / "llama-server", endpoints[: case.n_rpc])
    settings = settings_from_args(list(case.args), tool="fit-params")
    model = open_model(model_path)
    return Result(case, estimate(model, devices, settings), theirs)


#: Smallest non-zero figure llama.cpp prints in the matrix: the models are full-size (sparse files), so a
#: prediction of 0 or a few MiB cannot pass by tolerance (tests/memory/test_accuracy_llama.py checks it).
MIN_PRINTED_MIB = 16

#: Extra floor window for compute figures: none. The estimate replays every layer of the graph, as llama.cpp builds
#: it (only a drag preview cuts it to representative layers, app/memory/compute/compress.py, which is not exact).
COMPUTE_SLACK = 0


def within_floor(ours_bytes: int, theirs_mib: int, slack: int = 0) -> bool:
    """llama.cpp prints ``bytes/1024/1024`` (integer division): ours must floor to the same MiB."""
    return theirs_mib * MiB - slack <= ours_bytes < (theirs_mib + 1) * MiB + slack


def errors(result: Result) -> list[tuple[str, str, float, float, bool]]:
    """(device, quantity, ours MiB, theirs MiB, exact to the printed MiB) for every row and quantity."""
    out = []
    for row in result.theirs:
        mine = result.ours.device(row.name)
        for q, ours_b, theirs_mib, slack in (
            ("model", mine.model, row.model, 0),
            ("context", mine.context, row.context, 0),
            ("compute", mine.compute, row.compute, COMPUTE_SLACK),
        ):
            out.append((row.name, q, ours_b / MiB, float(theirs_mib), within_floor(ours_b, theirs_mib, slack)))
    return out


def single_device_args(args) -> list[str]:
    """A case's arguments for one device (``-ts`` dropped) as the Vulkan runs take them, with llama.cpp's fit
    off and repacking off (``CPU_REPACK`` weights are left out of ``--fit-print``)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "-ts":
            skip = True
        else:
            out.append(a)
    return out + ["--fit", "off", "--no-repack"]


def server_refusal(llama_bin: Path, target: Path, args: list[str], endpoints: list[str] | tuple[str, ...] = ()) -> str:
    """Start the real llama-server on ``target`` with ``args`` (``--rpc`` to ``endpoints``, no fit, no repack) on a
    port it cannot bind to the end, expecting it to stop before serving: its output (stdout and stderr)."""
    run = subprocess.run(
        [str(llama_bin / "llama-server"), "-m", str(target)]
        + (["--rpc", ",".join(endpoints)] if endpoints else [])
        + [*args, "--fit", "off", "--no-repack", "--host", "127.0.0.1", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode != 0, (run.stdout + run.stderr)[-2000:]
    return run.stdout + run.stderr
