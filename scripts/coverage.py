"""Generate docs/coverage.md from test results: what the memory model covers, per architecture and feature.

The rows are every architecture in the pinned llama.cpp's ``src/llama-arch.cpp``; the columns come from the
results the accuracy tests record (``LAYERDECK_COVERAGE_RESULTS``, see ``tests/memory/accuracy.py``):

* ``fit-print``: tests/memory/test_accuracy_llama.py, full-size (sparse) models against
  ``llama-fit-params --fit-print``: model (weights, i.e. blocks), context (KV and recurrent state) and compute
  per device, exact to the printed MiB;
* ``server-log``: the same file, tiny real models against the buffers ``llama-server -lv 4`` logs;
* ``serves``: tests/test_gguf_factory.py, the tiny model loads in ``llama-server`` and answers;
* ``refusal``: tests/memory/test_split_mode.py, a setting llama.cpp refuses is refused with its reason;
* ``vulkan``: tests/backends/test_vulkan.py, Vulkan0 (lavapipe) and RPC hosts against their dry runs.

    python scripts/coverage.py                    # run the tests (a few minutes), then write docs/coverage.md
    python scripts/coverage.py --results FILE     # use results recorded earlier
    python scripts/coverage.py --check            # exit 1 if docs/coverage.md is not what the results give
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.llamacpp.build import PINNED_VERSION, build_key, cache_root  # noqa: E402
from app.memory.compute import CHECKED_ARCHS, family_of  # noqa: E402
from app.memory.compute.models import REGISTRY  # noqa: E402
from app.memory.kv import MAMBA_STATE_ARCHS, RWKV_STATE_ARCHS  # noqa: E402
from app.model.hparams import HYBRID_ARCHS, KDA_ARCHS, RECURRENT_ARCHS  # noqa: E402

OUT = ROOT / "docs" / "coverage.md"
TESTS = [
    "tests/memory/test_accuracy_llama.py",
    "tests/memory/test_split_mode.py",
    "tests/backends/test_vulkan.py",
    "tests/test_gguf_factory.py::test_tiny_model_serves_completion",
    "tests/memory/test_gemma4_assistant.py",
]

#: Architectures of the table that are not text-generation models a user places on devices (why, briefly).
NOT_TEXT_GENERATION = {
    "clip": "vision/audio projector (the --mmproj file, see the features table)",
    "bert": "encoder (embeddings)",
    "modern-bert": "encoder (embeddings)",
    "nomic-bert": "encoder (embeddings)",
    "nomic-bert-moe": "encoder (embeddings)",
    "neo-bert": "encoder (embeddings)",
    "jina-bert-v2": "encoder (embeddings)",
    "jina-bert-v3": "encoder (embeddings)",
    "eurobert": "encoder (embeddings)",
    "t5encoder": "encoder only",
    "gemma-embedding": "embedding model",
    "llama-embed": "embedding model",
    "wavtokenizer-dec": "audio codec decoder",
    "qwen3tts": "text-to-speech: spoken by llama-tts (tools/tts/tts.cpp, through mtmd's audio-generation API); llama-server, which Layerdeck plans and launches, has no speech output",
    "pockettts": "text-to-speech: spoken by llama-tts (tools/tts/tts.cpp, through mtmd's audio-generation API); llama-server, which Layerdeck plans and launches, has no speech output",
    "eagle3": "speculative-decoding draft head: sized as a draft, see the features table",
    "dflash": "speculative-decoding draft head: sized as a draft, see the features table",
    "gemma4-assistant": "speculative-decoding draft head (Gemma 4's assistant, built over the target's context): "
    "sized as a draft, see the features table",
    "(unknown)": "placeholder entry of the table",
    # named in the table without a model class: llama.cpp refuses the file, and so does Layerdeck at open
    "gptj": 'llama.cpp builds no model for it ("unsupported model architecture"), refused at open',
}

#: Why an architecture without a replay of its own still has none (read in its src/models/<arch>.cpp); shown in
#: its approximate cell
NOT_YET: dict[str, str] = {
    "qwen4exp": (
        "not replayed: linear attention, QSA block-sparse attention, n-gram per-layer embeddings and "
        "hyper-connections in a 1,300-line graph that the pinned llama.cpp marks for complete reimplementation "
        "([TAG_QWEN4_REIMPLEMENT]: 'do not use it as a reference'), so a replay now would be matched to a graph "
        "about to change"
    ),
}

#: Exact where the suite compares, off in a benchmark's wider matrix (said in the compute cell)
BENCH_OFF: dict[str, str] = {}

#: Architectures whose compared models carry NextN/MTP blocks (left out, as llama.cpp does without MTP speculation).
NEXTN_CHECKED = frozenset({"glm4moe", "qwen35", "bailingmoe2"})

#: The features table: (name, the key its results carry, what to say while no result carries it). Results carry
#: a feature by their ``features`` list (the refusal, Vulkan and multi-device tests set it) or, for the fit-print
#: comparisons, by their arguments (``-sm tensor``, ``-sm none``).
FEATURES = [
    (
        "Vision/audio projector (--mmproj, --no-mmproj-offload)",
        "mmproj",
        "not compared yet",
    ),
    (
        "Speculative decoding with a draft model (-md, -ngld, -devd, -otd, -ctkd/-ctvd, --spec-type)",
        "draft",
        "not compared yet",
    ),
    (
        "MTP / NextN layers as a draft (--spec-type draft-mtp)",
        "mtp",
        "not compared yet",
    ),
    (
        "EAGLE-3 heads as a draft (--spec-type draft-eagle3 -md head.gguf)",
        "eagle3",
        "not compared yet",
    ),
    (
        "Gemma 4's assistant as a draft (-md assistant.gguf --spec-type draft-mtp)",
        "gemma4-assistant",
        "not compared yet",
    ),
    (
        "DFlash / DSpark / DFlash2 drafts (-md draft.gguf --spec-type draft-dflash / draft-dspark)",
        "dflash",
        "not compared yet",
    ),
    ("-sm tensor", "sm-tensor", "weights and KV split across devices is not modelled"),
    ("-sm row", "sm-row", "not modelled"),
    ("-sm none", "sm-none", "not modelled"),
    ("RPC hosts with several devices (ggml-rpc-server -d dev1,dev2)", "rpc-multi-device", "one lane per RPC host only"),
    ("Vulkan backend (lavapipe)", "vulkan", "only CPU and RPC are checked"),
    (
        "Placements llama.cpp aborts on or will not load (a cache above a Vulkan driver's storage-buffer range, "
        "-sm none -mg past the devices)",
        "abort",
        "estimated as if they ran",
    ),
]

#: What a feature's results mean, said after their counts.
FEATURE_NOTES = {
    "sm-tensor": "one Meta() device made of all GPU/RPC devices, its figures as llama-fit-params prints them "
    "(each device's share is not printed by llama.cpp nor sized); refused with llama.cpp's reason without flash "
    "attention or devices and for the architectures llama.cpp excludes; the board, which places blocks per "
    "device, refuses it",
    "sm-row": 'llama.cpp refuses it on every backend but SYCL ("does not support split buffers"), and so does '
    "the estimate, with that reason; SYCL's row split is refused as not modelled",
    "sm-none": "the whole model on --main-gpu",
    "mmproj": "the projector's device (-mmdev, the first of -dev, else the first GPU-type device, RPC included; "
    "--no-mmproj-offload: the CPU), its weights and every compute buffer against llama-server's load log (libmtmd's "
    "lines); compute replayed for gemma3, qwen2vl/2.5vl/3vl, pixtral/mistral3, gemma4v, idefics3, lfm2, internvl, "
    "glm4v/glm5v, minimax_m3, ling3vl, kimik25, kimivl, paddleocr, dots_ocr, llama4, deepseek4v, hunyuanvl, mlp (LLaVA 1.5/1.6, Granite Vision, Yi-type), phi4, janus_pro, lightonocr, nemotron_v2_vl, gemma4uv, step3vl, exaone4_5, resampler (MiniCPM-V), minicpmv4_6 (MiniCPM-V 4.6), granite4_vision (Granite Vision 4.1), cogvlm, ldp/ldpv2 (MobileVLM V1/V2), adapter (GLM-Edge), youtuvl, muse-glimmer, mimovl, yasa2, dots3note_v, deepseekocr/deepseekocr2 (DeepSeek-OCR 1/2) and gemma3nv (Gemma 3n), "
    "and for the audio encoders of Whisper (ultravox, qwen2a, voxtral, musicflamingo, meralion, glma), Qwen3-Omni "
    "(qwen3a), Gemma 4 (gemma4a, the encoder-free gemma4ua), LFM2-Audio (lfm2a), dots.3 note (dots3note_a), Nemotron Nano V2 VL's Parakeet (parakeet), MiMo-V2.5 (mimo_audio) and Granite Speech (granite_speech); a file with both encoders (Qwen2.5-Omni's, Qwen3-Omni's, Gemma 4's) as its "
    "two contexts; every vision type of the pinned clip-impl.h replayed (one a later llama.cpp adds: approximate, "
    "said so); the text-to-speech encoders (qwen3tts_spkenc/_gen, pockettts_spkenc/_gen) not counted, said so (llama-tts speaks with them; llama-server has no speech output); a "
    "block of its own on its lane",
    "draft": "the draft's weights, KV cache, compute and output buffers per device against llama-server's load "
    "log (the lines after 'loading draft model'), and the main context's extra output rows for the drafted tokens; "
    "its context has the target's cells, f16 caches unless -ctkd/-ctvd, one output row per slot; the board shows "
    "its blocks hatched on their lanes; speed at a user-set acceptance rate, shown as an upper bound (held to "
    "llama-server by benchmarks/bench_speculative.py: 67-108% too high on a 2-core CPU)",
    "mtp": "without -md, the NextN weights llama.cpp loads (load_mtp) on their layers' devices, the main context's "
    "n_rs_seq recurrent-state snapshots (the state 1 + n_rs_seq times, their copies in the graph) and the MTP "
    "context (a KV cache of the NextN layers in the draft's cache types, graph_mtp reserved with and without the "
    "draft's backend sampler) against llama-server's load log (the lines after 'creating MTP draft context'); "
    "refused with llama-server's reason where it cannot create the MTP context (no NextN layers, no MTP graph: "
    "bailingmoe2, glm5-next, kimi-k3); speed with MTP drafting at a user-set acceptance rate, shown as an upper "
    "bound (benchmarks/bench_speculative_mtp.py: the gain over the model alone 30-40% high on a 2-core CPU)",
    "eagle3": "the head's weights (fc on the output's device), KV cache, output buffer and compute (its decoder "
    "graph, reserved with and without its top-k backend sampler) and the target context's compute reserved again "
    "with the extracted layer inputs as outputs, against llama-server's load log and its reserve at the first "
    "request, for heads with their own token_embd/output and heads that read the target's (ctx_other, the tensors "
    "bound where the target keeps them; a -devd that leaves their device out aborts llama.cpp, and the estimate "
    "says so), with and without a d2t vocabulary map; the output buffers' growth at the first decode (extracted "
    "hidden states) is said, not counted; speed at a user-set acceptance rate (n head decodes, the target's batch, "
    "the encoder and decoder catch-up: benchmarks/bench_speculative.py --draft eagle3, from 19% below to 32% above "
    "llama-server on a 2-core CPU)",
    "dflash": "the head's weights, KV cache (non-causal, the target's cells), output buffer and compute (its "
    "block-diffusion decoder graph on a token batch, reserved with and without its top-k backend sampler; DSpark's "
    "Markov head and confidence head where the reserved blocks fit the trained block size; DFlash2's dynamic "
    "convolutions and candidate selector) and the target "
    "context's compute reserved again with the extracted layer inputs as outputs, against llama-server's load log "
    "and its reserve at the first request, for heads with their own token_embd/output and heads that read the "
    "target's, with and without a d2t vocabulary map, the type given or inferred from the file as llama.cpp "
    "infers it; a target layer the model lacks or does not extract is refused with llama.cpp's reason; the "
    "feature-injection graph (smaller) and the output buffers' growth at the first decode are said, not counted; "
    "DeepSeek-V4 DSpark heads (hyper-connected q-LoRA attention over a K-only window, sqrt-softplus MoE stages) "
    "replayed too, over a deepseek4 target whose extracted layer inputs (the hc streams' mean) are replayed as "
    "outputs; speed at a "
    "user-set acceptance rate (the block in one pass, the target's batch, the injection of its layer inputs: "
    "benchmarks/bench_speculative.py --draft dflash, 0-17% under llama-server on a 2-core CPU)",
    "gemma4-assistant": "its layers (all NextN, no trunk) loaded and placed as any model's, no KV cache of its own "
    "(it shares the target's last two layers' caches), and its compute (the target's token embeddings and those "
    "caches read where the target keeps them, reserved with and without its top-k backend sampler) against "
    "llama-server's load log on the CPU, RPC devices and Vulkan0; a -devd that leaves out the target cache's "
    "device aborts llama.cpp, and the estimate says so; speed at a user-set acceptance rate (n passes of the whole "
    "assistant, no catch-up: it reads the target's cache), not measured against llama-server and said so",
    "rpc-multi-device": "one lane per remote device, named as llama.cpp names them (RPC0, RPC1 on one host), "
    "each with its own buffer limits",
    "abort": "the estimate stops with llama.cpp's reason, naming the tensor llama.cpp names (\"pre-allocated tensor "
    '(cache_k_l15) in a buffer (Vulkan0) that cannot run the operation"; "invalid value for main_gpu"), and '
    "gives figures just under the limit that equal the dry run's; auto-fit says so, the fastest search skips them",
    "vulkan": "Vulkan0 on lavapipe and a remote Vulkan0 behind RPC: weights, context and compute exact, the "
    "backend's graph reordering (ggml_vk_graph_optimize) replayed (docs/memory-model.md, Backends)",
}


#: What "every result passed" means where it is less than exact to the MiB.
FEATURE_STATUS: dict[str, str] = {}


def _feature_of(r: dict) -> list[str]:
    got = list(r.get("features") or ())
    if r["test"] == "fit-print":
        args = r.get("args") or ""
        for mode in ("tensor", "none", "row"):
            if re.search(rf"(^|\s)-sm {mode}(\s|$)", args):
                got.append(f"sm-{mode}")
    return got


def feature_rows(rows: list[dict]) -> list[str]:
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        for f in _feature_of(r):
            by[f].append(r)
    out = []
    for name, key, pending in FEATURES:
        got = by.get(key, [])
        if not got:
            out.append(f"| {name} | not yet | {pending} |")
            continue
        bad = [r for r in got if not _passed(r)]
        kinds = defaultdict(int)
        for r in got:
            kinds[r["test"]] += 1
        counts = ", ".join(f"{n} {t}" for t, n in sorted(kinds.items()))
        backends = ", ".join(sorted({b for r in got for b in r["backends"]}))
        status = FEATURE_STATUS.get(key, "exact") if not bad else f"✗ ({len(bad)} of {len(got)} off)"
        if all(r["test"] == "refusal" for r in got) and not bad:
            status = "refused, as llama.cpp"
        note = f"{counts} ({backends}): {FEATURE_NOTES.get(key, '')}".rstrip(": ")
        out.append(f"| {name} | {status} | {note} |")
    return out


#: The projector types the architectures' published --mmproj files use (a text architecture -> the libmtmd
#: projector types of its vision and audio encoders: Ultravox and Voxtral over Llama, Qwen2-Audio and Music
#: Flamingo over Qwen2, Qwen2.5-Omni over Qwen2-VL, Qwen3-ASR over Qwen3-VL, Qwen3-Omni over Qwen3-VL-MoE,
#: MERaLiON over Gemma 2); their comparisons are the mmproj
#: server-log results of those types. Types without a replayed graph are named as approximate.
PROJECTORS_OF = {
    "llama": ("ultravox", "voxtral", "llava", "ldpv2", "ldp"),
    "chatglm": ("adapter",),  # GLM-Edge-V's text (GlmForCausalLM converts to chatglm)
    "gemma2": ("meralion",),
    "llama4": ("llama4",),
    "phi3": ("phi4",),
    "step35": ("step3vl",),
    "exaone-moe": ("exaone4_5",),
    "nemotron_h": ("nemotron_v2_vl", "parakeet"),  # conversion/nemotron.py writes Parakeet beside Nano V2 VL
    "deepseek4": ("deepseek4v",),
    "glm4": ("glm4v",),
    "glm4moe": ("glm4v",),
    "minimax-m3": ("minimax_m3",),
    "bailingmoe3": ("ling3vl",),
    "deepseek2": ("kimik25", "kimivl", "youtuvl", "deepseekocr", "deepseekocr2"),  # Youtu-VL's, DeepSeek-OCR's text
    "gemma3": ("gemma3",),
    "gemma3n": ("gemma3nv",),  # its audio encoder (gemma3na) clip_init skips
    "gemma4": ("gemma4v", "gemma4a", "gemma4-both", "gemma4ua", "gemma4uv"),
    "qwen2": ("qwen2a", "musicflamingo", "minicpmv"),  # MiniCPM-V 2.6's text is Qwen2
    "qwen3": ("minicpmv",),  # MiniCPM-V 4.5's text is Qwen3
    "qwen35": ("qwen3vl", "minicpmv4_6"),  # Qwen3.5's vision is Qwen3-VL's; MiniCPM-V 4.6's text is Qwen3.5
    "qwen35moe": ("qwen3vl",),  # conversion/qwen3vl.py converts Qwen3_5MoeForConditionalGeneration's vision too
    "cogvlm": ("cogvlm",),
    "granite": ("llava", "granite4_vision", "granite_speech"),  # Granite Vision 3.x/4.1's and granite-speech-3.3's text
    "mimo2": ("mimovl", "mimo_audio"),  # MiMo-V2.5 (MiMoV2ForCausalLM: text mimo2, vision mimovl, conversion/mimo.py)
    "muse-glimmer": (
        "muse-glimmer",
    ),  # one name for the text model and its projector (gguf MODEL_ARCH/VisionProjectorType)
    "dots3note": ("dots3note_v", "dots3note_a"),  # conversion/dots3.py writes both encoders beside the text
    "qwen2vl": ("qwen2vl", "qwen2.5vl", "omni"),
    "qwen3vl": ("qwen3vl", "qwen3a"),
    "qwen3vlmoe": ("qwen3vl", "omni3"),
    "mistral3": ("mistral3", "pixtral"),
    "lfm2": ("lfm2", "lfm2a"),
}
_PROJECTOR_TYPES = (
    "qwen3vl",
    "qwen2.5vl",
    "qwen2vl",
    "qwen2a",
    "mistral3",
    "pixtral",
    "gemma4v",
    "idefics3",
    "lfm2",
    "internvl",
    "ultravox",
    "voxtral",
    "musicflamingo",
    "meralion",
    "qwen3a",
    "omni3",
    "omni",
    "gemma4a",
    "gemma4-both",
    "gemma4ua",
    "glma",
    "glm4v",
    "glm5v",
    "minimax_m3",
    "ling3vl",
    "kimik25",
    "kimivl",
    "paddleocr",
    "dots_ocr",
    "llama4",
    "deepseek4v",
    "hunyuanvl",
    "llava",
    "phi4",
    "janus_pro",
    "lightonocr",
    "nemotron_v2_vl",
    "gemma4uv",
    "lfm2a",
    "step3vl",
    "exaone4_5",
    "dots3note_a",
    "minicpmv4_6",
    "minicpmv",
    "granite4_vision",
    "cogvlm",
    "ldpv2",
    "ldp",
    "adapter",
    "youtuvl",
    "muse-glimmer",
    "mimovl",
    "yasa2",
    "dots3note_v",
    "deepseekocr2",
    "deepseekocr",
    "gemma3nv",
    "parakeet",
    "mimo_audio",
    "granite_speech",
)


def _projector_type(case: str) -> str:
    """The projector type of an mmproj result, from its case id (``mmproj-qwen3vl-rpc1``; gemma3 has no prefix): the
    longest type the id starts with (``lfm2a-cpu`` is lfm2a's, not lfm2's; ``minicpmv4_6-rpc1`` minicpmv4_6's)."""
    rest = case.removeprefix("mmproj-").removeprefix("vulkan-")
    return max((t for t in _PROJECTOR_TYPES if rest.startswith(t)), key=len, default="gemma3")


def projector_cell(arch: str, rows: list[dict]) -> str:
    types = PROJECTORS_OF.get(arch)
    if not types:
        return "not yet"
    replayed = [t for t in types if t in _PROJECTOR_TYPES or t == "gemma3"]
    approximate = [t for t in types if t not in replayed]
    got = [r for r in rows if "mmproj" in (r.get("features") or ()) and _projector_type(r["case"]) in replayed]
    tail = f"; approximate: {', '.join(approximate)}" if approximate else ""
    if not got:
        return "not yet" + tail
    bad = [r for r in got if not _passed(r)]
    backends = ", ".join(sorted({b for r in got for b in r["backends"]}))
    head = "exact" if not approximate else f"exact: {', '.join(replayed)}"
    n = f"{len(got)} case{'' if len(got) == 1 else 's'}"
    return (f"✗ ({len(bad)} of {len(got)} off)" if bad else f"{head} ({n}: {backends})") + tail


def arch_table(src: Path) -> list[str]:
    """``general.architecture`` names in the order of ``LLM_ARCH_NAMES``."""
    text = (src / "src" / "llama-arch.cpp").read_text()
    block = text[text.index("LLM_ARCH_NAMES") :]
    block = block[: block.index("};")]
    return re.findall(r"\{\s*LLM_ARCH_[A-Z0-9_]+\s*,\s*\"([^\"]+)\"\s*\}", block)


def run_tests(results: Path) -> int:
    env = dict(os.environ, LAYERDECK_COVERAGE_RESULTS=str(results))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def load(results: Path) -> list[dict]:
    return [json.loads(line) for line in results.read_text().splitlines() if line.strip()]


def _mark(oks: list[bool]) -> str:
    if not oks:
        return "—"
    bad = oks.count(False)
    return "✓" if not bad else f"✗ ({bad} of {len(oks)} cases off)"


def render(archs: list[str], rows: list[dict]) -> str:
    by_arch: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_arch[r["arch"]][r["test"]].append(r)
    n_fit = sum(1 for r in rows if r["test"] == "fit-print")
    n_srv = sum(1 for r in rows if r["test"] == "server-log")
    out = [
        "# Memory-model coverage",
        "",
        f"Generated by `scripts/coverage.py` from {len(rows)} test results ({n_fit} `llama-fit-params "
        f"--fit-print` comparisons on full-size sparse models, {n_srv} `llama-server -lv 4` buffer-log "
        f"comparisons on tiny models, and the tiny models' completions) against the pinned llama.cpp "
        f"({PINNED_VERSION}); do not edit by hand.",
        "",
        "Columns: **loads** — the test factory's tiny model loads in `llama-server` and answers; **blocks** — "
        "weights per device (the `model` column) exact to the printed MiB; **KV** — KV cache and recurrent "
        "state per device (`context`) exact; **compute** — `exact` where every compared compute buffer matched "
        "(and no case took the approximate path), `approximate` where the estimate uses a graph that was never "
        "compared (the estimate says so in its notes), `not modelled` for models that are not placed for text "
        "generation; **backends** — where the comparisons ran; **projector**, **MTP** — see the features table.",
        "",
        "| architecture | graph | loads | blocks | KV | compute | backends | projector | MTP |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    counts: dict[str, int] = defaultdict(int)
    for a in archs:
        got = by_arch.get(a, {})
        fit = got.get("fit-print", [])
        srv = got.get("server-log", [])
        serves = got.get("serves", [])
        if a in NOT_TEXT_GENERATION:
            out.append(f"| {a} | — | — | — | — | not modelled: {NOT_TEXT_GENERATION[a]} | — | — | — |")
            counts["not modelled"] += 1
            continue
        fam = family_of(a)
        graph = f"`{fam.name}`" + ("" if a in REGISTRY else " (fallback)")
        blocks = _mark([r["ok"]["model"] for r in fit])
        kv = _mark([r["ok"]["context"] for r in fit])
        compute_ok = [r["ok"]["compute"] and not r["approximate"] for r in fit] + [r["ok"] for r in srv]
        if a in CHECKED_ARCHS and fit and all(compute_ok):
            compute, category = "exact", "exact"
        elif a in CHECKED_ARCHS:
            off = compute_ok.count(False)
            compute = (
                f"marked exact, {off} of {len(compute_ok)} comparisons off"
                if fit
                else "marked exact, no comparison recorded"
            )
            category = "unconfirmed"
        else:
            known = sorted({r["compute_off"] for r in fit if r.get("compute_off")})
            if fit:
                good = sum(1 for r in fit if r["ok"]["compute"])
                why = f"compared: {good} of {len(fit)} cases match" + (f"; {'; '.join(known)}" if known else "")
            elif a in REGISTRY:
                why = "graph of its own, not compared"
            else:
                why = "llama-style graph, not compared"
            if (
                a in RECURRENT_ARCHS or a in HYBRID_ARCHS
            ) and a not in MAMBA_STATE_ARCHS | RWKV_STATE_ARCHS | KDA_ARCHS:
                why += "; recurrent/linear-attention state not modelled"
            if a in NOT_YET:
                why += f"; {NOT_YET[a]}"
            compute, category = f"approximate ({why})", "approximate"
        if a in BENCH_OFF:
            compute += f" ({BENCH_OFF[a]})"
        counts[category] += 1
        backends = sorted({b for r in fit + srv + got.get("vulkan", []) if _passed(r) for b in r["backends"]})
        loads = _mark([r["ok"] for r in serves])
        mtp_rows = [r for r in srv if "mtp" in (r.get("features") or ())]
        if mtp_rows:
            off = sum(1 for r in mtp_rows if not _passed(r))
            mtp = (
                f"draft-mtp exact ({len(mtp_rows)} server-log)"
                if not off
                else f"draft-mtp ✗ ({off} of {len(mtp_rows)} off)"
            )
        else:
            mtp = "NextN left out (as llama.cpp without MTP)" if a in NEXTN_CHECKED else "—"
        out.append(
            f"| {a} | {graph} | {loads} | {blocks} | {kv} | {compute} | {', '.join(backends) or '—'} | "
            f"{projector_cell(a, rows)} | {mtp} |"
        )
    out += [
        "",
        f"{len(archs)} architectures: {counts['exact']} exact, {counts['approximate']} approximate, "
        f"{counts['not modelled']} not modelled (not text generation)"
        + (
            f", {counts['unconfirmed']} marked exact but not confirmed by these results"
            if counts["unconfirmed"]
            else ""
        )
        + ".",
        "",
        "## Features",
        "",
        "| feature | status | notes |",
        "|---|---|---|",
    ]
    out += feature_rows(rows)
    out += [
        "",
        "## Cases",
        "",
        "| test | case | architecture | backends | result |",
        "|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["test"], r["arch"], r["case"])):
        out.append(
            f"| {r['test']} | {r['case']} | {r['arch']} | {', '.join(r['backends'])} | "
            f"{'pass' if _passed(r) else 'FAIL'} |"
        )
    return "\n".join(out) + "\n"


def _passed(r: dict) -> bool:
    ok = r["ok"]
    return all(ok.values()) and not r.get("approximate") if isinstance(ok, dict) else bool(ok)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, help="JSON-lines results recorded earlier (default: run the tests)")
    ap.add_argument(
        "--src",
        type=Path,
        default=cache_root() / build_key() / "src",
        help="the pinned llama.cpp source tree (default: the build cache's)",
    )
    ap.add_argument("--check", action="store_true", help="compare with docs/coverage.md instead of writing it")
    args = ap.parse_args(argv)
    if not (args.src / "src" / "llama-arch.cpp").is_file():
        print(
            f"error: no llama.cpp source tree at {args.src}: build the tools first "
            "(python -m app.llamacpp.build) or pass --src",
            file=sys.stderr,
        )
        return 2
    if args.results is None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "results.jsonl"
            rc = run_tests(path)
            rows = load(path) if path.is_file() else []
        if rc not in (0, 1) or not rows:
            print(f"error: the tests did not run (pytest exit code {rc})", file=sys.stderr)
            return 2
    else:
        rows = load(args.results)
    text = render(arch_table(args.src), rows)
    if args.check:
        same = OUT.is_file() and OUT.read_text() == text
        print("docs/coverage.md is up to date" if same else "docs/coverage.md differs from the results")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(rows)} results)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
