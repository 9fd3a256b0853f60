"""Every llama.cpp flag Layerdeck knows, in one table: spellings, value, environment variable, effect, tools.

Source: ``common/arg.cpp`` (``common_params_parser_init``, the options of
llama-server, llama-cli and llama-fit-params) and ``tools/llama-bench``'s own
parser, of the pinned llama.cpp (:data:`app.llamacpp.build.PINNED_VERSION`),
in llama.cpp's option order (the order llama.cpp applies environment
variables in, which matters for ``-ot``, ``-cmoe``, ``-ncmoe``, ``-ncffn``:
they append to one override list). Then the flags only llama-bench has, and
spellings only older builds had (``legacy``).

One row per option (:class:`Flag`):

``name``
    The spelling Layerdeck writes (llama.cpp's first, except ``--fit``).
``aliases`` / ``negative``
    Other spellings of the same option; ``negative`` turn a yes/no option off
    (``-no-kvu``, ``--no-repack``). No spelling appears in two rows.
``metavar`` / ``nargs``
    Whether it takes a value (1), two (``--control-vector-layer-range``) or
    none (a switch). ``bare``: the value a bare flag means in older builds
    (``-fa`` and ``--color`` were switches). ``bench_value``: llama-bench
    reads a ``0|1`` value after this switch (``-nkvo 1``).
``env``
    Its ``LLAMA_ARG_*`` variable (``joins``: given twice, both values count, so
    in the variable they join with ``,``). A valued flag's variable holds the value; a
    switch's counts only when truthy (``is_truthy``); a yes/no option's holds
    the state (truthy: the flag, falsey: its negative; ``LLAMA_ARG_NO_*`` set
    to anything also means off), as ``common_params_parse_ex`` reads them.
``effect``
    Whether llama.cpp's memory use (:data:`MEMORY`) or tensor placement
    (:data:`PLACEMENT`) depends on it, or neither (:data:`NONE`).
``setting``
    What Layerdeck reads it into (a :class:`~app.memory.settings.LlamaSettings`
    field, or ``model``/``rpc``/``fit``); ``None``: a passthrough flag, kept
    as typed. A flag with an effect but no setting is one llama.cpp uses
    memory for that Layerdeck does not model (``-cram``, ``--mmproj``, a draft
    model), listed by :attr:`app.command.parse.ParsedArgs.unmodelled`.
``convert`` / ``on`` / ``off``
    How the value text becomes the setting (a converter of
    :mod:`app.command.values`, with llama.cpp's limits); for switches, the
    setting's value when the flag (``on``) or its negative (``off``) is given.
``tools``
    Which of llama-server, llama-cli, llama-bench, llama-fit-params accept it.
``removed`` / ``legacy``
    llama.cpp still knows the spelling but refuses it (``removed``: what to
    use instead), or only older builds had it (``legacy``).
``secret``
    The value (and its variable) is a credential (``--api-key``,
    ``--hf-token``): logs and displays show it masked
    (:func:`app.command.argv.mask_secrets`).

Spellings are matched as llama.cpp does: exactly, except that in a ``--``
spelling ``_`` reads as ``-``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..lanes import StrEnum
from .values import (
    FFN_EXPS_REGEX,
    cache_type,
    cpu_ffn_layers,
    cpu_moe_layers,
    csv,
    load_mode,
    n_gpu_layers,
    n_parallel,
    non_negative,
    on_off,
    on_off_auto,
    overrides,
    positive,
    rpc_list,
    spec_types,
    split_mode,
    tensor_split,
    text,
    whole,
)

__all__ = ["Effect", "MEMORY", "PLACEMENT", "NONE", "TOOLS", "Flag", "FLAGS", "lookup", "get", "spellings", "normalize"]

#: Layerdeck's names for the llama.cpp programs (the ``tool`` of :class:`~app.memory.settings.LlamaSettings`).
TOOLS = ("server", "cli", "bench", "fit-params")
_TOOL_LETTERS = {"s": "server", "c": "cli", "b": "bench", "f": "fit-params"}


class Effect(StrEnum):
    MEMORY = "memory"  # changes how much memory llama.cpp uses (and so the estimate)
    PLACEMENT = "placement"  # changes where tensors or layers go
    NONE = "none"  # neither (port, sampling, templates, logging, ...)


MEMORY, PLACEMENT, NONE = Effect.MEMORY, Effect.PLACEMENT, Effect.NONE

Converter = Callable[[str, str], Any]


@dataclass(frozen=True)
class Flag:
    """One llama.cpp option; see the module docstring for the fields."""

    name: str
    aliases: tuple[str, ...] = ()
    negative: tuple[str, ...] = ()
    metavar: str | None = None
    nargs: int = 0
    env: str | None = None
    effect: Effect = NONE
    tools: frozenset[str] = frozenset()
    setting: str | None = None
    convert: Converter | None = None
    on: Any = True
    off: Any = False
    bare: str | None = None
    bench_value: bool = False
    joins: bool = False
    removed: str | None = None
    legacy: str | None = None
    secret: bool = False

    @property
    def positive(self) -> tuple[str, ...]:
        """The spellings that turn the option on or give it a value (``name`` first)."""
        return (self.name, *self.aliases)

    @property
    def spellings(self) -> tuple[str, ...]:
        return (*self.positive, *self.negative)

    @property
    def passthrough(self) -> bool:
        """Layerdeck does not read this flag; it stays in the command as typed."""
        return self.setting is None

    @property
    def env_kind(self) -> str | None:
        """``value``, ``switch`` (counts when truthy), ``bool`` (holds the yes/no state) or None (no variable)."""
        if self.env is None:
            return None
        if self.nargs:
            return "value"
        return "bool" if self.negative else "switch"

    @property
    def choices(self) -> frozenset[str] | None:
        """The values a flag with an optional value (``bare``) recognises as its value."""
        return getattr(self.convert, "choices", None)

    def takes(self, tool: str = "server") -> int:
        """How many values follow this flag for ``tool`` (llama-bench gives some switches a 0|1 value)."""
        if self.nargs == 0 and self.bench_value and tool == "bench":
            return 1
        return self.nargs

    def accepted_by(self, tool: str) -> bool:
        return tool in self.tools


def F(
    names: str,
    metavar: str | None = None,
    *,
    nargs: int | None = None,
    neg: str = "",
    env: str | None = None,
    tools: str = "",
    effect: Effect = NONE,
    setting: str | None = None,
    convert: Converter | None = None,
    on: Any = True,
    off: Any = False,
    bare: str | None = None,
    bench_value: bool = False,
    joins: bool = False,
    removed: str | None = None,
    legacy: str | None = None,
    secret: bool = False,
) -> Flag:
    """A table row: ``names`` and ``neg`` are space-separated spellings, ``tools`` letters of s(erver), c(li),
    b(ench), f(it-params); a ``metavar`` makes it a valued flag."""
    first, *aliases = names.split()
    if nargs is None:
        nargs = 0 if metavar is None else 1
    if nargs and convert is None and setting is not None:
        convert = text
    return Flag(
        first,
        tuple(aliases),
        tuple(neg.split()),
        metavar,
        nargs,
        env,
        effect,
        frozenset(_TOOL_LETTERS[t] for t in tools),
        setting,
        convert,
        on,
        off,
        bare,
        bench_value,
        joins,
        removed,
        legacy,
        secret,
    )


_OVERRIDE_CPU_MOE = ((FFN_EXPS_REGEX, "CPU"),)

# fmt: off
FLAGS: tuple[Flag, ...] = (
    F("-h --help --usage", tools="scbf"),
    F("--version", tools="scbf"),
    F("-cl --cache-list", tools="scf"),
    F("--completion-bash", tools="scf"),
    F("--server-base", "URL", tools="c"),
    F("--verbose-prompt", tools="c"),
    F("--display-prompt", neg="--no-display-prompt", tools="c"),
    F("-co --color", "[on|off|auto]", tools="c", convert=on_off_auto, bare="on"),
    F("-t --threads", "N", env="LLAMA_ARG_THREADS", tools="scbf", setting="n_threads", convert=whole),
    F("-tb --threads-batch", "N", tools="scf"),
    F("-C --cpu-mask", "M", tools="scbf"),
    F("-Cr --cpu-range", "lo-hi", tools="scf"),
    F("--cpu-strict", "<0|1>", tools="scbf"),
    F("--prio", "N", tools="scbf"),
    F("--poll", "<0...100>", tools="scbf"),
    F("-Cb --cpu-mask-batch", "M", tools="scf"),
    F("-Crb --cpu-range-batch", "lo-hi", tools="scf"),
    F("--cpu-strict-batch", "<0|1>", tools="scf"),
    F("--prio-batch", "N", tools="scf"),
    F("--poll-batch", "<0|1>", tools="scf"),
    F("-lcs --lookup-cache-static", "FNAME", tools="s"),
    F("-lcd --lookup-cache-dynamic", "FNAME", tools="s"),
    F("-c --ctx-size", "N", env="LLAMA_ARG_CTX_SIZE", tools="scf", effect=MEMORY, setting="n_ctx",
      convert=non_negative),
    F("--kv-unified-per-slot", "N", env="LLAMA_ARG_KV_UNIFIED_PER_SLOT", tools="s", effect=MEMORY),
    F("-n --predict --n-predict --n-gen", "N", env="LLAMA_ARG_N_PREDICT", tools="scbf"),
    F("-b --batch-size", "N", env="LLAMA_ARG_BATCH", tools="scbf", effect=MEMORY, setting="n_batch",
      convert=positive),
    F("-ub --ubatch-size", "N", env="LLAMA_ARG_UBATCH", tools="scbf", effect=MEMORY, setting="n_ubatch",
      convert=non_negative),
    F("--keep", "N", tools="scf"),
    F("--swa-full", env="LLAMA_ARG_SWA_FULL", tools="scf", effect=MEMORY, setting="swa_full"),
    F("-ctxcp --ctx-checkpoints --swa-checkpoints", "N", env="LLAMA_ARG_CTX_CHECKPOINTS", tools="sc", effect=MEMORY),
    F("-cms --checkpoint-min-step", "N", env="LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT", tools="s"),
    F("-cram --cache-ram", "N", env="LLAMA_ARG_CACHE_RAM", tools="sc", effect=MEMORY),
    F("-kvu --kv-unified", neg="-no-kvu --no-kv-unified", env="LLAMA_ARG_KV_UNIFIED", tools="s", effect=MEMORY,
      setting="kv_unified"),
    F("--cache-idle-slots", neg="--no-cache-idle-slots", env="LLAMA_ARG_CACHE_IDLE_SLOTS", tools="s"),
    F("--context-shift", neg="--no-context-shift", env="LLAMA_ARG_CONTEXT_SHIFT", tools="sc"),
    F("--chunks", "N", tools=""),
    F("-fa --flash-attn", "[on|off|auto]", env="LLAMA_ARG_FLASH_ATTN", tools="scbf", effect=MEMORY,
      setting="flash_attn", convert=on_off_auto, bare="on"),
    F("-p --prompt --n-prompt", "PROMPT", tools="cbf"),
    F("-sys --system-prompt", "PROMPT", tools="c"),
    F("--perf", neg="--no-perf", env="LLAMA_ARG_PERF", tools="scf"),
    F("--show-timings", neg="--no-show-timings", env="LLAMA_ARG_SHOW_TIMINGS", tools="c"),
    F("-f --file", "FNAME", tools="cf"),
    F("-sysf --system-prompt-file", "FNAME", tools="c"),
    F("--in-file", "FNAME", tools=""),
    F("-bf --binary-file", "FNAME", tools="cf"),
    F("-e --escape", neg="--no-escape", tools="scf"),
    F("-ptc --print-token-count", "N", tools=""),
    F("--prompt-cache", "FNAME", tools=""),
    F("--prompt-cache-all", tools=""),
    F("--prompt-cache-ro", tools=""),
    F("-r --reverse-prompt --repetitions", "PROMPT", tools="scb"),
    F("-sp --special", tools="sc"),
    F("-cnv --conversation", neg="-no-cnv --no-conversation", tools=""),
    F("-st --single-turn", tools="c"),
    F("-i --interactive", tools=""),
    F("-if --interactive-first", tools=""),
    F("-mli --multiline-input", tools="c"),
    F("--in-prefix-bos", tools=""),
    F("--in-prefix", "STRING", tools=""),
    F("--in-suffix", "STRING", tools=""),
    F("--warmup", neg="--no-warmup", tools="scb"),
    F("--spm-infill", tools="s"),
    F("--samplers", "SAMPLERS", tools="scf"),
    F("-s --seed", "SEED", tools="scf"),
    F("--sampler-seq --sampling-seq", "SEQUENCE", tools="scf"),
    F("--ignore-eos", tools="scf"),
    F("--temp --temperature", "N", env="LLAMA_ARG_TEMPERATURE", tools="scf"),
    F("--top-k", "N", env="LLAMA_ARG_TOP_K", tools="scf"),
    F("--top-p", "N", env="LLAMA_ARG_TOP_P", tools="scf"),
    F("--min-p", "N", env="LLAMA_ARG_MIN_P", tools="scf"),
    F("--top-nsigma --top-n-sigma", "N", tools="scf"),
    F("--xtc-probability", "N", tools="scf"),
    F("--xtc-threshold", "N", tools="scf"),
    F("--typical --typical-p", "N", tools="scf"),
    F("--repeat-last-n", "N", tools="scf"),
    F("--repeat-penalty", "N", env="LLAMA_ARG_REPEAT_PENALTY", tools="scf"),
    F("--presence-penalty", "N", env="LLAMA_ARG_PRESENCE_PENALTY", tools="scf"),
    F("--frequency-penalty", "N", env="LLAMA_ARG_FREQUENCY_PENALTY", tools="scf"),
    F("--dry-multiplier", "N", tools="scf"),
    F("--dry-base", "N", tools="scf"),
    F("--dry-allowed-length", "N", tools="scf"),
    F("--dry-penalty-last-n", "N", tools="scf"),
    F("--dry-sequence-breaker", "STRING", tools="scf"),
    F("--adaptive-target", "N", tools="scf"),
    F("--adaptive-decay", "N", tools="scf"),
    F("--dynatemp-range", "N", tools="scf"),
    F("--dynatemp-exp", "N", tools="scf"),
    F("--mirostat", "N", tools="scf"),
    F("--mirostat-lr", "N", tools="scf"),
    F("--mirostat-ent", "N", tools="scf"),
    F("-l --logit-bias", "TOKEN_ID(+/-)BIAS", tools="scf"),
    F("--grammar", "GRAMMAR", tools="scf"),
    F("--grammar-file", "FNAME", tools="scf"),
    F("-j --json-schema", "SCHEMA", tools="scf"),
    F("-jf --json-schema-file", "FILE", tools="scf"),
    F("-bs --backend-sampling", env="LLAMA_ARG_BACKEND_SAMPLING", tools="scf"),
    F("--pooling", "{none,mean,cls,last,rank}", env="LLAMA_ARG_POOLING", tools="s", effect=MEMORY),
    F("--attention", "{causal,non-causal}", tools=""),
    F("--rope-scaling", "{none,linear,yarn}", env="LLAMA_ARG_ROPE_SCALING_TYPE", tools="scf"),
    F("--rope-scale", "N", env="LLAMA_ARG_ROPE_SCALE", tools="scf"),
    F("--rope-freq-base", "N", env="LLAMA_ARG_ROPE_FREQ_BASE", tools="scf"),
    F("--rope-freq-scale", "N", env="LLAMA_ARG_ROPE_FREQ_SCALE", tools="scf"),
    F("--yarn-orig-ctx", "N", env="LLAMA_ARG_YARN_ORIG_CTX", tools="scf"),
    F("--yarn-ext-factor", "N", env="LLAMA_ARG_YARN_EXT_FACTOR", tools="scf"),
    F("--yarn-attn-factor", "N", env="LLAMA_ARG_YARN_ATTN_FACTOR", tools="scf"),
    F("--yarn-beta-slow", "N", env="LLAMA_ARG_YARN_BETA_SLOW", tools="scf"),
    F("--yarn-beta-fast", "N", env="LLAMA_ARG_YARN_BETA_FAST", tools="scf"),
    F("-gan --grp-attn-n", "N", env="LLAMA_ARG_GRP_ATTN_N", tools=""),
    F("-gaw --grp-attn-w", "N", env="LLAMA_ARG_GRP_ATTN_W", tools=""),
    F("-kvo --kv-offload", neg="-nkvo --no-kv-offload", env="LLAMA_ARG_KV_OFFLOAD", tools="scbf", bench_value=True,
      effect=MEMORY, setting="no_kv_offload", on=False, off=True),
    F("--repack", neg="-nr --no-repack", env="LLAMA_ARG_REPACK", tools="scbf", bench_value=True, effect=MEMORY,
      setting="repack"),
    F("--no-host", env="LLAMA_ARG_NO_HOST", tools="scbf", bench_value=True, effect=MEMORY, setting="use_host",
      on=False),
    F("-ctk --cache-type-k", "TYPE", env="LLAMA_ARG_CACHE_TYPE_K", tools="scbf", effect=MEMORY, setting="type_k",
      convert=cache_type),
    F("-ctv --cache-type-v", "TYPE", env="LLAMA_ARG_CACHE_TYPE_V", tools="scbf", effect=MEMORY, setting="type_v",
      convert=cache_type),
    F("--hellaswag", tools=""),
    F("--hellaswag-tasks", "N", tools=""),
    F("--winogrande", tools=""),
    F("--winogrande-tasks", "N", tools=""),
    F("--multiple-choice", tools=""),
    F("--multiple-choice-tasks", "N", tools=""),
    F("--kl-divergence", tools=""),
    F("--save-all-logits --kl-divergence-base", "FNAME", tools=""),
    F("--ppl-stride", "N", tools=""),
    F("--ppl-output-type", "<0|1>", tools=""),
    F("-dt --defrag-thold", "N", env="LLAMA_ARG_DEFRAG_THOLD", tools="scf"),
    F("-np --parallel", "N", env="LLAMA_ARG_N_PARALLEL", tools="scf", effect=MEMORY, setting="n_parallel",
      convert=n_parallel),
    F("-ns --sequences", "N", tools=""),
    F("-cb --cont-batching", neg="-nocb --no-cont-batching", env="LLAMA_ARG_CONT_BATCHING", tools="s"),
    F("-mm --mmproj", "FILE", env="LLAMA_ARG_MMPROJ", tools="sc", effect=MEMORY, setting="mmproj", convert=text),
    F("-mmu --mmproj-url", "URL", env="LLAMA_ARG_MMPROJ_URL", tools="sc"),
    F("--mmproj-auto", neg="--no-mmproj --no-mmproj-auto", env="LLAMA_ARG_MMPROJ_AUTO", tools="sc"),
    F("--mmproj-offload", neg="--no-mmproj-offload", env="LLAMA_ARG_MMPROJ_OFFLOAD", tools="sc", effect=PLACEMENT,
      setting="mmproj_offload", on=True, off=False),
    F("-mmdev --mmproj-device", "DEVICE", env="MTMD_BACKEND_DEVICE", tools="sc", effect=PLACEMENT,
      setting="mmproj_device", convert=text),
    F("--image --audio --video", "FILE", tools="c"),
    F("--image-min-tokens", "N", env="LLAMA_ARG_IMAGE_MIN_TOKENS", tools="sc", effect=MEMORY,
      setting="image_min_tokens", convert=whole),
    F("--image-max-tokens", "N", env="LLAMA_ARG_IMAGE_MAX_TOKENS", tools="sc", effect=MEMORY,
      setting="image_max_tokens", convert=whole),
    F("--mtmd-batch-max-tokens", "N", env="LLAMA_ARG_MTMD_BATCH_MAX_TOKENS", tools="s"),
    F("--video-fps", "N", env="LLAMA_ARG_VIDEO_FPS", tools="sc"),
    F("--video-timestamp-interval", "N", env="LLAMA_ARG_VIDEO_TIMESTAMP_INTERVAL", tools="sc"),
    F("--video-ffmpeg-dir", "DIR", env="LLAMA_ARG_VIDEO_FFMPEG_DIR", tools="sc"),
    F("--rpc -rpc", "SERVERS", env="LLAMA_ARG_RPC", tools="scbf", effect=PLACEMENT, setting="rpc", convert=rpc_list),
    F("-lm --load-mode", "MODE", env="LLAMA_ARG_LOAD_MODE", tools="scbf", effect=MEMORY, setting="load_mode",
      convert=load_mode),
    F("-lzm --lazy-mode", "MODE", env="LLAMA_ARG_LAZY_MODE", tools="scbf", effect=MEMORY),
    F("--numa", "TYPE", env="LLAMA_ARG_NUMA", tools="scbf"),
    F("-dev --device", "<dev1,dev2,..>", env="LLAMA_ARG_DEVICE", tools="scbf", effect=PLACEMENT, setting="devices",
      convert=csv),
    F("--list-devices", tools="scbf"),
    F("-ot --override-tensor", "<tensor name pattern>=<buffer type>,...", env="LLAMA_ARG_OVERRIDE_TENSOR",
      tools="scbf", effect=PLACEMENT, setting="overrides", convert=overrides, joins=True),
    F("-cmoe --cpu-moe", env="LLAMA_ARG_CPU_MOE", tools="scf", effect=PLACEMENT, setting="overrides",
      on=_OVERRIDE_CPU_MOE),
    F("-ncmoe --n-cpu-moe", "N", env="LLAMA_ARG_N_CPU_MOE", tools="scbf", effect=PLACEMENT, setting="overrides",
      convert=cpu_moe_layers),
    F("-ncffn --n-cpu-ffn", "N", env="LLAMA_ARG_N_CPU_FFN", tools="scf", effect=PLACEMENT, setting="overrides",
      convert=cpu_ffn_layers),
    F("-ngl --gpu-layers --n-gpu-layers", "N", env="LLAMA_ARG_N_GPU_LAYERS", tools="scbf", effect=PLACEMENT,
      setting="n_gpu_layers", convert=n_gpu_layers),
    F("-sm --split-mode", "{none,layer,row,tensor}", env="LLAMA_ARG_SPLIT_MODE", tools="scbf", effect=PLACEMENT,
      setting="split_mode", convert=split_mode),
    F("-ts --tensor-split", "N0,N1,N2,...", env="LLAMA_ARG_TENSOR_SPLIT", tools="scbf", effect=PLACEMENT,
      setting="tensor_split", convert=tensor_split),
    F("-mg --main-gpu", "INDEX", env="LLAMA_ARG_MAIN_GPU", tools="scbf", effect=PLACEMENT, setting="main_gpu",
      convert=whole),
    F("--fit -fit", "[on|off]", env="LLAMA_ARG_FIT", tools="scf", effect=PLACEMENT, setting="fit", convert=on_off),
    F("-fitp --fit-print", "[on|off]", env="LLAMA_ARG_FIT_ESTIMATE", tools="f"),
    F("-fitt --fit-target", "MiB0,MiB1,MiB2,...", env="LLAMA_ARG_FIT_TARGET", tools="scbf", effect=PLACEMENT),
    F("-fitc --fit-ctx", "N", env="LLAMA_ARG_FIT_CTX", tools="scbf", effect=PLACEMENT),
    F("--check-tensors", tools="scf"),
    F("--override-kv", "KEY=TYPE:VALUE,...", tools="scf"),
    F("--op-offload", neg="--no-op-offload -nopo", tools="scbf", bench_value=True, effect=MEMORY,
      setting="op_offload"),
    F("--lora", "FNAME", tools="scf", effect=MEMORY),
    F("--lora-scaled", "FNAME:SCALE,...", tools="scf", effect=MEMORY),
    F("--control-vector", "FNAME", tools="scf"),
    F("--control-vector-scaled", "FNAME:SCALE,...", tools="scf"),
    F("--control-vector-layer-range", "START END", nargs=2, tools="scf"),
    F("-a --alias", "STRING", env="LLAMA_ARG_ALIAS", tools="s"),
    F("--tags", "STRING", env="LLAMA_ARG_TAGS", tools="s"),
    F("-m --model", "FNAME", env="LLAMA_ARG_MODEL", tools="scbf", effect=MEMORY, setting="model", convert=text),
    F("-mu --model-url", "MODEL_URL", env="LLAMA_ARG_MODEL_URL", tools="scf", effect=MEMORY),
    F("-dr --docker-repo", "[<repo>/]<model>[:quant]", env="LLAMA_ARG_DOCKER_REPO", tools="scf", effect=MEMORY),
    F("-hf -hfr --hf-repo", "<user>/<model>[:quant]", env="LLAMA_ARG_HF_REPO", tools="scbf", effect=MEMORY),
    F("-hff --hf-file", "FILE", env="LLAMA_ARG_HF_FILE", tools="scbf", effect=MEMORY),
    F("-hft --hf-token", "TOKEN", env="HF_TOKEN", tools="scbf", secret=True),
    F("--mtp", tools=""),
    F("--dflash", tools=""),
    F("--eagle3", tools=""),
    F("--context-file", "FNAME", tools=""),
    F("--chunk-size", "N", tools=""),
    F("--chunk-separator", "STRING", tools=""),
    F("--junk", "N", tools=""),
    F("--pos", "N", tools=""),
    F("-o --output --output-file", "FNAME", tools="cb"),
    F("-ofreq --output-frequency", "N", tools=""),
    F("--output-format", "{gguf,dat}", tools=""),
    F("--save-frequency", "N", tools=""),
    F("--process-output", tools=""),
    F("--ppl", neg="--no-ppl", tools=""),
    F("--chunk --from-chunk", "N", tools=""),
    F("--show-statistics", tools=""),
    F("--parse-special", tools=""),
    F("--ids", tools=""),
    F("--stdin", tools=""),
    F("--no-bos", tools=""),
    F("--no-parse-special", tools=""),
    F("--show-count", tools=""),
    F("-pps", tools=""),
    F("-tgs", tools=""),
    F("-npp", "n0,n1,...", tools=""),
    F("-ntg", "n0,n1,...", tools=""),
    F("-npl", "n0,n1,...", tools=""),
    F("--embd-normalize", "N", tools="s"),
    F("--embd-output-format", "FORMAT", tools=""),
    F("--embd-separator", "STRING", tools=""),
    F("--cls-separator", "STRING", tools=""),
    F("--host", "HOST", env="LLAMA_ARG_HOST", tools="s"),
    F("--port", "PORT", env="LLAMA_ARG_PORT", tools="s"),
    F("--reuse-port", env="LLAMA_ARG_REUSE_PORT", tools="s"),
    F("--path", "PATH", env="LLAMA_ARG_STATIC_PATH", tools="s"),
    F("--cors-origins", "ORIGINS", env="LLAMA_ARG_CORS_ORIGINS", tools="s"),
    F("--cors-methods", "METHODS", env="LLAMA_ARG_CORS_METHODS", tools="s"),
    F("--cors-headers", "HEADERS", env="LLAMA_ARG_CORS_HEADERS", tools="s"),
    F("--cors-credentials", neg="--no-cors-credentials", env="LLAMA_ARG_CORS_CREDENTIALS", tools="s"),
    F("--api-prefix", "PREFIX", env="LLAMA_ARG_API_PREFIX", tools="s"),
    F("--ui-config --webui-config", "JSON", env="LLAMA_ARG_UI_CONFIG", tools="s"),
    F("--ui-config-file --webui-config-file", "PATH", env="LLAMA_ARG_UI_CONFIG_FILE", tools="s"),
    F("--ui-mcp-proxy --webui-mcp-proxy", neg="--no-ui-mcp-proxy --no-webui-mcp-proxy",
      env="LLAMA_ARG_UI_MCP_PROXY", tools="s"),
    F("--tools", "TOOL1,TOOL2,...", env="LLAMA_ARG_TOOLS", tools="s"),
    F("--tools-runtime", "OPTION", env="LLAMA_ARG_TOOLS_RUNTIME", tools="s"),
    F("--mcp-servers-config", "PATH", env="LLAMA_ARG_MCP_SERVERS_CONFIG", tools="s"),
    F("--mcp-servers-json", "JSON", env="LLAMA_ARG_MCP_SERVERS_JSON", tools="s"),
    F("-ag --agent", neg="-no-ag --no-agent", env="LLAMA_ARG_AGENT", tools="s"),
    F("--ui --webui", neg="--no-ui --no-webui", env="LLAMA_ARG_UI", tools="s"),
    F("--embedding --embeddings -embd", env="LLAMA_ARG_EMBEDDINGS", tools="sb", bench_value=True, effect=MEMORY),
    F("--rerank --reranking", env="LLAMA_ARG_RERANKING", tools="s", effect=MEMORY),
    F("--api-key", "KEY", env="LLAMA_API_KEY", tools="s", secret=True),
    F("--api-key-file", "FNAME", env="LLAMA_ARG_API_KEY_FILE", tools="s"),
    F("--ssl-key-file", "FNAME", env="LLAMA_ARG_SSL_KEY_FILE", tools="s"),
    F("--ssl-cert-file", "FNAME", env="LLAMA_ARG_SSL_CERT_FILE", tools="s"),
    F("--chat-template-kwargs", "STRING", env="LLAMA_ARG_CHAT_TEMPLATE_KWARGS", tools="sc"),
    F("-to --timeout", "N", env="LLAMA_ARG_TIMEOUT", tools="s"),
    F("--sse-ping-interval", "N", env="LLAMA_ARG_SSE_PING_INTERVAL", tools="s"),
    F("--threads-http", "N", env="LLAMA_ARG_THREADS_HTTP", tools="s"),
    F("--cache-prompt", neg="--no-cache-prompt", env="LLAMA_ARG_CACHE_PROMPT", tools="s"),
    F("--cache-reuse", "N", env="LLAMA_ARG_CACHE_REUSE", tools="s"),
    F("--metrics", env="LLAMA_ARG_ENDPOINT_METRICS", tools="s"),
    F("--props", env="LLAMA_ARG_ENDPOINT_PROPS", tools="s"),
    F("--slots", neg="--no-slots", env="LLAMA_ARG_ENDPOINT_SLOTS", tools="s"),
    F("--slot-save-path", "PATH", tools="s"),
    F("--media-path", "PATH", tools="s"),
    F("--models-dir", "PATH", env="LLAMA_ARG_MODELS_DIR", tools="s"),
    F("--models-preset", "PATH", env="LLAMA_ARG_MODELS_PRESET", tools="s"),
    F("--models-max", "N", env="LLAMA_ARG_MODELS_MAX", tools="s"),
    F("--models-autoload", neg="--no-models-autoload", env="LLAMA_ARG_MODELS_AUTOLOAD", tools="s"),
    F("--jinja", neg="--no-jinja", env="LLAMA_ARG_JINJA", tools="sc"),
    F("--reasoning-format", "FORMAT", env="LLAMA_ARG_THINK", tools="sc"),
    F("-rea --reasoning", "[on|off|auto]", env="LLAMA_ARG_REASONING", tools="sc"),
    F("--reasoning-effort", "LEVEL", env="LLAMA_ARG_REASONING_EFFORT", tools="sc"),
    F("--reasoning-budget", "N", env="LLAMA_ARG_THINK_BUDGET", tools="sc"),
    F("--reasoning-budget-message", "MESSAGE", env="LLAMA_ARG_THINK_BUDGET_MESSAGE", tools="sc"),
    F("--reasoning-preserve", neg="--no-reasoning-preserve", env="LLAMA_ARG_REASONING_PRESERVE", tools="sc"),
    F("--chat-template", "JINJA_TEMPLATE", env="LLAMA_ARG_CHAT_TEMPLATE", tools="sc"),
    F("--chat-template-file", "JINJA_TEMPLATE_FILE", env="LLAMA_ARG_CHAT_TEMPLATE_FILE", tools="sc"),
    F("--skip-chat-parsing", neg="--no-skip-chat-parsing", env="LLAMA_ARG_SKIP_CHAT_PARSING", tools="sc"),
    F("--prefill-assistant", neg="--no-prefill-assistant", env="LLAMA_ARG_PREFILL_ASSISTANT", tools="s"),
    F("-sps --slot-prompt-similarity", "SIMILARITY", tools="s"),
    F("--lora-init-without-apply", tools="s"),
    F("--sleep-idle-seconds", "SECONDS", tools="s"),
    F("--simple-io", tools="c"),
    F("--positive-file", "FNAME", tools=""),
    F("--negative-file", "FNAME", tools=""),
    F("--pca-batch", "N", tools=""),
    F("--pca-iter", "N", tools=""),
    F("--method", "{pca, mean}", tools=""),
    F("--log-disable", tools="scf"),
    F("--log-file", "FNAME", env="LLAMA_ARG_LOG_FILE", tools="scf"),
    F("--log-jsonl", neg="--no-log-jsonl", env="LLAMA_ARG_LOG_JSONL", tools="scf"),
    F("--log-prompts-dir", "PATH", tools="sc"),
    F("--log-colors", "[on|off|auto]", env="LLAMA_ARG_LOG_COLORS", tools="scf"),
    F("-v --verbose --log-verbose", tools="scbf"),
    F("--offline", env="LLAMA_ARG_OFFLINE", tools="scbf"),
    F("-lv --verbosity --log-verbosity", "N", env="LLAMA_ARG_LOG_VERBOSITY", tools="scf"),
    F("--log-prefix", neg="--no-log-prefix", env="LLAMA_ARG_LOG_PREFIX", tools="scf"),
    F("--log-timestamps", neg="--no-log-timestamps", env="LLAMA_ARG_LOG_TIMESTAMPS", tools="scf"),
    F("--spec-draft-hf -hfd -hfrd --hf-repo-draft", "<user>/<model>[:quant]", env="LLAMA_ARG_SPEC_DRAFT_HF_REPO",
      tools="sc", effect=MEMORY),
    F("--spec-draft-threads -td --threads-draft", "N", tools="sc"),
    F("--spec-draft-threads-batch -tbd --threads-batch-draft", "N", tools="sc"),
    F("--spec-draft-cpu-mask -Cd --cpu-mask-draft", "M", tools="sc"),
    F("--spec-draft-cpu-range -Crd --cpu-range-draft", "lo-hi", tools="sc"),
    F("--spec-draft-cpu-strict --cpu-strict-draft", "<0|1>", tools="sc"),
    F("--spec-draft-prio --prio-draft", "N", tools="sc"),
    F("--spec-draft-poll --poll-draft", "<0|1>", tools="sc"),
    F("--spec-draft-cpu-mask-batch -Cbd --cpu-mask-batch-draft", "M", tools="sc"),
    F("--spec-draft-cpu-range-batch -Crbd --cpu-range-batch-draft", "lo-hi", tools=""),
    F("--spec-draft-cpu-strict-batch --cpu-strict-batch-draft", "<0|1>", tools="sc"),
    F("--spec-draft-prio-batch --prio-batch-draft", "N", tools="sc"),
    F("--spec-draft-poll-batch --poll-batch-draft", "<0|1>", tools="sc"),
    F("--spec-draft-type-k -ctkd --cache-type-k-draft", "TYPE", env="LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_K",
      tools="scf", effect=MEMORY, setting="draft_type_k", convert=cache_type),
    F("--spec-draft-type-v -ctvd --cache-type-v-draft", "TYPE", env="LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_V",
      tools="scf", effect=MEMORY, setting="draft_type_v", convert=cache_type),
    F("--spec-draft-override-tensor -otd --override-tensor-draft", "<tensor name pattern>=<buffer type>,...",
      tools="sc", effect=PLACEMENT, setting="draft_overrides", convert=overrides),
    F("--spec-draft-cpu-moe -cmoed --cpu-moe-draft", env="LLAMA_ARG_SPEC_DRAFT_CPU_MOE", tools="sc",
      effect=PLACEMENT, setting="draft_overrides", on=_OVERRIDE_CPU_MOE),
    F("--spec-draft-n-cpu-moe --spec-draft-ncmoe -ncmoed --n-cpu-moe-draft", "N",
      env="LLAMA_ARG_SPEC_DRAFT_N_CPU_MOE", tools="sc", effect=PLACEMENT, setting="draft_overrides",
      convert=cpu_moe_layers),
    F("--spec-draft-n-max", "N", env="LLAMA_ARG_SPEC_DRAFT_N_MAX", tools="sc", effect=MEMORY,
      setting="spec_draft_n_max", convert=non_negative),
    F("--spec-draft-n-min", "N", env="LLAMA_ARG_SPEC_DRAFT_N_MIN", tools="sc"),
    F("--spec-synth-len", "L", env="LLAMA_ARG_SPEC_SYNTH_LEN", tools="sc"),
    F("--spec-synth-rates", "P0,P1,...", env="LLAMA_ARG_SPEC_SYNTH_RATES", tools="sc"),
    F("--spec-draft-p-split --draft-p-split", "P", env="LLAMA_ARG_SPEC_DRAFT_P_SPLIT", tools="sc"),
    F("--spec-draft-p-min --draft-p-min", "P", env="LLAMA_ARG_SPEC_DRAFT_P_MIN", tools="sc"),
    F("--spec-draft-backend-sampling", neg="--no-spec-draft-backend-sampling",
      env="LLAMA_ARG_SPEC_DRAFT_BACKEND_SAMPLING", tools="sc", effect=MEMORY, setting="spec_draft_backend_sampling",
      on=True, off=False),
    F("--spec-draft-device -devd --device-draft", "<dev1,dev2,..>", tools="sc", effect=PLACEMENT,
      setting="draft_devices", convert=csv),
    F("--spec-draft-ngl -ngld --gpu-layers-draft --n-gpu-layers-draft", "N", env="LLAMA_ARG_N_GPU_LAYERS_DRAFT",
      tools="sc", effect=PLACEMENT, setting="draft_n_gpu_layers", convert=n_gpu_layers),
    F("--spec-draft-model -md --model-draft", "FNAME", env="LLAMA_ARG_SPEC_DRAFT_MODEL", tools="sc", effect=MEMORY,
      setting="draft_model", convert=text),
    F("--spec-type", "VALUE", env="LLAMA_ARG_SPEC_TYPE", tools="sc", effect=MEMORY, setting="spec_types",
      convert=spec_types, joins=True),
    F("--spec-ngram-mod-n-min", "N", tools="sc"),
    # the drafted-token counts of the ngram types size the main context's output rows: not read (their
    # defaults are assumed), so they are listed as unmodelled when given
    F("--spec-ngram-mod-n-max", "N", tools="sc", effect=MEMORY),
    F("--spec-ngram-mod-n-match", "N", tools="sc"),
    F("--spec-ngram-simple-size-n", "N", tools="sc"),
    F("--spec-ngram-simple-size-m", "N", tools="sc", effect=MEMORY),
    F("--spec-ngram-simple-min-hits", "N", tools="sc"),
    F("--spec-ngram-map-k-size-n", "N", tools="sc"),
    F("--spec-ngram-map-k-size-m", "N", tools="sc", effect=MEMORY),
    F("--spec-ngram-map-k-min-hits", "N", tools="sc"),
    F("--spec-ngram-map-k4v-size-n", "N", tools="sc"),
    F("--spec-ngram-map-k4v-size-m", "N", tools="sc", effect=MEMORY),
    F("--spec-ngram-map-k4v-min-hits", "N", tools="sc"),
    F("--draft --draft-n --draft-max", "N", env="LLAMA_ARG_DRAFT_MAX", tools="sc",
      removed="use --spec-draft-n-max or --spec-ngram-mod-n-max"),
    F("--draft-min --draft-n-min", "N", env="LLAMA_ARG_DRAFT_MIN", tools="sc",
      removed="use --spec-draft-n-min or --spec-ngram-mod-n-min"),
    F("--spec-ngram-size-n", "N", tools="s", removed="use the respective --spec-ngram-*-size-n"),
    F("--spec-ngram-size-m", "N", tools="s", removed="use the respective --spec-ngram-*-size-m"),
    F("--spec-ngram-min-hits", "N", tools="s", removed="use the respective --spec-ngram-*-min-hits"),
    F("--tts-lang", "FNAME", tools=""),
    F("--tts-speaker-file", "FNAME", tools=""),
    F("--diffusion-steps", "N", tools=""),
    F("--diffusion-visual", tools=""),
    F("--diffusion-eps", "F", tools=""),
    F("--diffusion-algorithm", "N", tools=""),
    F("--diffusion-alg-temp", "F", tools=""),
    F("--diffusion-block-length", "N", tools=""),
    F("--diffusion-cfg-scale", "F", tools=""),
    F("--diffusion-add-gumbel-noise", "F", tools=""),
    F("-lr --learning-rate", "ALPHA", tools=""),
    F("-lr-min --learning-rate-min", "ALPHA", tools=""),
    F("-decay-epochs --learning-rate-decay-epochs", "ALPHA", tools=""),
    F("-wd --weight-decay", "WD", tools=""),
    F("-val-split --val-split", "FRACTION", tools=""),
    F("-epochs --epochs", "N", tools=""),
    F("-opt --optimizer", "sgd|adamw", tools=""),
    F("--check", tools=""),
    F("--save-logits", tools=""),
    F("--logits-output-dir", "PATH", tools=""),
    F("--tensor-filter", "REGEX", tools=""),
    F("--embd-gemma-default", tools="s"),
    F("--fim-qwen-1.5b-default", tools="s"),
    F("--fim-qwen-3b-default", tools="s"),
    F("--fim-qwen-7b-default", tools="s"),
    F("--fim-qwen-7b-spec", tools="s"),
    F("--fim-qwen-14b-spec", tools="s"),
    F("--fim-qwen-30b-default", tools="s"),
    F("--gpt-oss-20b-default", tools="sc"),
    F("--gpt-oss-120b-default", tools="sc"),
    F("--vision-gemma-4b-default", tools="sc"),
    F("--vision-gemma-12b-default", tools="sc"),
    F("--spec-default", tools="sc"),
    F("-pg", "VALUE", tools="b"),
    F("-d --n-depth", "VALUE", tools="b"),
    F("--delay", "VALUE", tools="b"),
    F("-oe --output-err", "VALUE", tools="b"),
    F("--progress", tools="b"),
    # spellings of older builds (the pinned llama.cpp reads -lm/--load-mode instead)
    F("--no-mmap", tools="scf", effect=MEMORY, setting="load_mode", on="none", legacy="-lm none"),
    F("--mlock", tools="scf", effect=MEMORY, setting="load_mode", on="mlock", legacy="-lm mlock"),

)
# fmt: on

_BY_SPELLING: dict[str, tuple[Flag, bool]] = {}
for _flag in FLAGS:
    for _s in _flag.positive:
        _BY_SPELLING[_s] = (_flag, True)
    for _s in _flag.negative:
        _BY_SPELLING[_s] = (_flag, False)
_BY_NAME = {f.name: f for f in FLAGS}


def normalize(spelling: str) -> str:
    """llama.cpp reads ``_`` as ``-`` in a ``--`` spelling (``--ctx_size`` is ``--ctx-size``)."""
    return spelling.replace("_", "-") if spelling.startswith("--") else spelling


def lookup(spelling: str) -> tuple[Flag, bool] | None:
    """The row of ``spelling`` and whether it is a positive spelling (False: one of ``negative``), or None."""
    return _BY_SPELLING.get(normalize(spelling))


def get(spelling: str) -> Flag:
    """The row of a spelling Layerdeck itself uses (KeyError for one the table lacks: a programming error)."""
    hit = _BY_SPELLING.get(spelling)
    if hit is None:
        raise KeyError(f"{spelling!r} is not in the flag table (app/command/flags.py)")
    return hit[0]


def spellings(*names: str) -> tuple[str, ...]:
    """Every spelling meaning the same as one of ``names``, in table order, each once.

    A positive spelling brings its row's positive spellings, a negative one its row's negatives;
    a name the table does not know stands for itself.
    """
    out: list[str] = []
    for name in names:
        hit = lookup(name)
        group: Iterable[str] = (name,) if hit is None else (hit[0].positive if hit[1] else hit[0].negative)
        out += [s for s in group if s not in out]
    return tuple(out)
