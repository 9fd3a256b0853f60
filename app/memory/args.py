"""Read a llama.cpp command line into :class:`LlamaSettings` (the flags that change memory).

Spellings follow ``common/arg.cpp``. Flags that do not affect memory are
skipped (with their value, where they take one); flags this module does not
know are reported so the caller can warn. ``-ot``, ``-cmoe``, ``-ncmoe`` and
``-ncffn`` append to one override list in command-line order, as llama.cpp
does (``LLM_FFN_EXPS_REGEX``, ``llm_add_n_cpu_ffn_overrides`` in ``common/common.h``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .settings import NGL_ALL, NGL_AUTO, LlamaSettings

FFN_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
FFN_DENSE_REGEX = r"\.ffn_(up|down|gate)\."


#: llama.cpp flags and their LLAMA_ARG_* variables (common/arg.cpp ``set_env``), in llama.cpp's option order
#: (the order environment values are applied in: -ot, then -cmoe, then -ncmoe).
ENV_VARS = {
    "-m": "LLAMA_ARG_MODEL", "--rpc": "LLAMA_ARG_RPC", "-dev": "LLAMA_ARG_DEVICE", "-ngl": "LLAMA_ARG_N_GPU_LAYERS",
    "-ts": "LLAMA_ARG_TENSOR_SPLIT", "-ot": "LLAMA_ARG_OVERRIDE_TENSOR", "-cmoe": "LLAMA_ARG_CPU_MOE",
    "-ncmoe": "LLAMA_ARG_N_CPU_MOE", "-c": "LLAMA_ARG_CTX_SIZE", "-np": "LLAMA_ARG_N_PARALLEL",
    "-ctk": "LLAMA_ARG_CACHE_TYPE_K", "-ctv": "LLAMA_ARG_CACHE_TYPE_V",
    "-fa": "LLAMA_ARG_FLASH_ATTN", "-t": "LLAMA_ARG_THREADS", "-b": "LLAMA_ARG_BATCH", "-ub": "LLAMA_ARG_UBATCH",
    "--fit": "LLAMA_ARG_FIT", "--swa-full": "LLAMA_ARG_SWA_FULL", "-ncffn": "LLAMA_ARG_N_CPU_FFN",
    "--host": "LLAMA_ARG_HOST", "--port": "LLAMA_ARG_PORT",
}
ENV_SWITCHES = {"-cmoe", "--swa-full"}
#: Yes/no options whose variable holds the state itself (common/arg.cpp): flag when true, flag when false.
ENV_BOOLS = {"LLAMA_ARG_KV_UNIFIED": ("-kvu", "-no-kvu"), "LLAMA_ARG_KV_OFFLOAD": (None, "-nkvo")}
#: common_arg's is_truthy / is_falsey, exactly (case-sensitive)
_TRUE = {"on", "enabled", "true", "1"}
_FALSE = {"off", "disabled", "false", "0"}


def env_to_args(env: dict[str, str]) -> list[str]:
    """``LLAMA_ARG_*`` variables as the flags they stand for; llama.cpp applies them before the command line.

    Switches count only when truthy; ``LLAMA_ARG_OVERRIDE_TENSOR`` may hold several comma-joined overrides.
    """
    out: list[str] = []
    for flag, var in ENV_VARS.items():
        if var not in env:
            continue
        value = env[var]
        if flag in ENV_SWITCHES:
            if value in _TRUE:
                out.append(flag)
        else:
            out += [flag, value]
    for var, (on, off) in ENV_BOOLS.items():
        value = env.get(var)
        flag = on if value in _TRUE else off if value in _FALSE else None
        if flag:
            out.append(flag)
    return out


class ArgsError(ValueError):
    """A flag's value is not what llama.cpp accepts; the message names the flag."""


def n_cpu_moe_patterns(n: int) -> list[tuple[str, str]]:
    return [(rf"blk\.{i}{FFN_EXPS_REGEX}", "CPU") for i in range(n)]


def n_cpu_ffn_patterns(n: int) -> list[tuple[str, str]]:
    return [(rf"blk\.{i}{FFN_DENSE_REGEX}", "CPU") for i in range(n)]


def parse_overrides(value: str) -> list[tuple[str, str]]:
    """``-ot`` value: split on ',' then each item at its first '=' (``parse_tensor_buffer_overrides``)."""
    out = []
    for item in value.split(","):
        if not item:
            continue
        if "=" not in item:
            raise ArgsError(f"-ot item {item!r} has no '=BUFFER_TYPE' part (expected PATTERN=CPU or PATTERN=CUDA0).")
        pattern, buft = item.split("=", 1)
        out.append((pattern, buft))
    return out


# flag spellings -> canonical key
_VALUE_FLAGS = {
    "-m": "model", "--model": "model",
    "--rpc": "rpc",
    "-c": "ctx", "--ctx-size": "ctx",
    "-np": "parallel", "--parallel": "parallel",
    "-ctk": "ctk", "--cache-type-k": "ctk",
    "-ctv": "ctv", "--cache-type-v": "ctv",
    "-b": "batch", "--batch-size": "batch",
    "-ub": "ubatch", "--ubatch-size": "ubatch",
    "-ngl": "ngl", "--gpu-layers": "ngl", "--n-gpu-layers": "ngl",
    "-ts": "ts", "--tensor-split": "ts",
    "-dev": "dev", "--device": "dev",
    "-sm": "sm", "--split-mode": "sm",
    "-mg": "mg", "--main-gpu": "mg",
    "-ot": "ot", "--override-tensor": "ot",
    "-ncmoe": "ncmoe", "--n-cpu-moe": "ncmoe",
    "-ncffn": "ncffn", "--n-cpu-ffn": "ncffn",
    "-t": "threads", "--threads": "threads",
    "-fit": "fit", "--fit": "fit",
    "-lm": "load_mode", "--load-mode": "load_mode",
}
_SWITCHES = {
    "-kvu": "kvu", "--kv-unified": "kvu", "-no-kvu": "no_kvu", "--no-kv-unified": "no_kvu",
    "--swa-full": "swa_full", "-nkvo": "nkvo", "--no-kv-offload": "nkvo",
    "-cmoe": "cmoe", "--cpu-moe": "cmoe",
    "-nr": "no_repack", "--no-repack": "no_repack", "--repack": "repack",
    "--no-host": "no_host", "--no-op-offload": "no_op_offload", "--op-offload": "op_offload",
    "--no-mmap": "no_mmap", "--mlock": "mlock",
}
#: -fa takes an optional value in old builds (bare -fa meant on); today it requires on|off|auto.
_FA = {"-fa", "--flash-attn"}
#: Flags that take a value but do not change memory (skipped with their value).
_IGNORED_VALUE = {
    "--host", "--port", "-a", "--alias", "--api-key", "--api-key-file", "-tb", "--threads-batch", "-lv",
    "--log-verbosity", "--verbosity", "--log-file", "--temp", "--top-k", "--top-p", "--min-p", "-n", "--n-predict",
    "--seed", "-s", "--chat-template", "--chat-template-file", "--jinja-template", "-cram", "--cache-ram", "-ctxcp",
    "--ctx-checkpoints", "--numa", "-fitt", "--fit-target", "-fitc", "--fit-ctx", "-fitp", "--fit-print",
    "--timeout", "-to", "--threads-http", "--slot-save-path", "--reasoning-format", "--reasoning-budget",
    "--mmproj", "-mm", "--path", "--prio", "--poll", "-C", "--cpu-mask", "--cpu-range", "--repeat-penalty",
    "--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale", "-p", "--prompt", "-f", "--file",
    "-r", "--reverse-prompt", "-sys", "--system-prompt", "--grammar", "--grammar-file", "-j", "--json-schema",
    "--keep", "--kv-unified-per-slot", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-md", "--model-draft",
    "--lora", "--lora-scaled", "--control-vector", "-dt", "--defrag-thold", "-e", "--escape", "-pg", "-pp", "-tg",
    "-r", "--repetitions", "-o", "--output", "-cb", "--cont-batching",
}
_IGNORED_SWITCHES = {
    "--metrics", "--no-slots", "--slots", "--props", "-v", "--verbose", "--log-jsonl", "--jinja", "--no-jinja",
    "-cnv", "--conversation", "-no-cnv", "--no-conversation", "-i", "--interactive", "--no-warmup", "--warmup",
    "--embedding", "--embeddings", "--check-tensors", "--no-webui", "--webui", "-cb", "--cont-batching", "-nocb",
    "--no-cont-batching", "--list-devices", "--no-perf", "--simple-io", "--color", "-sp", "--special", "--ignore-eos",
}


@dataclass
class ParsedArgs:
    settings: LlamaSettings
    model: str | None = None
    rpc: list[str] = field(default_factory=list)
    fit: str | None = None
    load_mode: str | None = None
    ignored: list[str] = field(default_factory=list)   # known flags without memory effect
    unknown: list[str] = field(default_factory=list)   # flags we do not know
    program: str | None = None

    @property
    def warnings(self) -> list[str]:
        w = [f"unknown flag {u} was ignored" for u in self.unknown]
        if self.fit in (None, "on") and (self.settings.n_gpu_layers not in (None, NGL_AUTO) or self.settings.tensor_split
                                          or self.settings.overrides):
            w.append("--fit is on (llama.cpp's default) but -ngl/-ts/-ot are set, so llama.cpp will not fit; "
                     "pass --fit off to make that explicit")
        return w


def _int(flag: str, v: str) -> int:
    try:
        return int(v)
    except ValueError:
        raise ArgsError(f"{flag} expects a whole number, got {v!r}.") from None


def parse_llama_args(argv: list[str], tool: str = "server", env: dict[str, str] | None = None) -> ParsedArgs:
    """Parse llama.cpp arguments (program name optional). Raises :class:`ArgsError` on bad values.

    ``env`` (e.g. the ``LLAMA_ARG_*`` prefixes of a pasted command) is applied first, as llama.cpp does,
    so flags on the command line win.
    """
    s = LlamaSettings(tool=tool)
    out = ParsedArgs(settings=s)
    args = list(argv)
    if args and not args[0].startswith("-"):
        out.program = args.pop(0)
    if env:
        args = env_to_args(env) + args
    i = 0

    def value(flag: str) -> str:
        nonlocal i
        if i + 1 >= len(args):
            raise ArgsError(f"{flag} needs a value.")
        i += 1
        return args[i]

    while i < len(args):
        raw = args[i]
        flag, eq, inline = raw.partition("=") if raw.startswith("--") else (raw, "", "")
        if not eq:
            flag = raw
        get = (lambda f: inline) if eq else value
        if flag in _VALUE_FLAGS:
            key, v = _VALUE_FLAGS[flag], get(flag)
            if key == "model":
                out.model = v
            elif key == "rpc":
                out.rpc = [x for x in v.split(",") if x]
            elif key == "ctx":
                s.n_ctx = _int(flag, v)
            elif key == "parallel":
                s.n_parallel = _int(flag, v)
                if s.n_parallel == 0:
                    raise ArgsError("-np 0 is not valid: use -np -1 (auto) or a number of slots.")
            elif key == "ctk":
                s.type_k = v.lower()
            elif key == "ctv":
                s.type_v = v.lower()
            elif key == "batch":
                s.n_batch = _int(flag, v)
            elif key == "ubatch":
                s.n_ubatch = _int(flag, v)
            elif key == "ngl":
                s.n_gpu_layers = {"auto": NGL_AUTO, "all": NGL_ALL}.get(v.lower()) if v.lower() in ("auto", "all") \
                    else _int(flag, v)
            elif key == "ts":
                try:
                    s.tensor_split = [float(x) for x in re.split(r"[,/]+", v) if x]
                except ValueError:
                    raise ArgsError(f"-ts expects numbers like 3,1, got {v!r}.") from None
            elif key == "dev":
                s.devices = [x for x in v.split(",") if x]
            elif key == "sm":
                if v not in ("none", "layer", "row", "tensor"):
                    raise ArgsError(f"-sm must be none, layer, row or tensor, got {v!r}.")
                s.split_mode = v
            elif key == "mg":
                s.main_gpu = _int(flag, v)
            elif key == "ot":
                s.overrides.extend(parse_overrides(v))
            elif key == "ncmoe":
                s.overrides.extend(n_cpu_moe_patterns(_int(flag, v)))
            elif key == "ncffn":
                s.overrides.extend(n_cpu_ffn_patterns(_int(flag, v)))
            elif key == "threads":
                s.n_threads = _int(flag, v)
            elif key == "fit":
                out.fit = v
            elif key == "load_mode":
                out.load_mode = s.load_mode = v
        elif flag in _SWITCHES:
            key = _SWITCHES[flag]
            if key == "kvu":
                s.kv_unified = True
            elif key == "no_kvu":
                s.kv_unified = False
            elif key == "swa_full":
                s.swa_full = True
            elif key == "nkvo":
                s.no_kv_offload = True
            elif key == "cmoe":
                s.overrides.append((FFN_EXPS_REGEX, "CPU"))
            elif key == "no_repack":
                s.repack = False
            elif key == "repack":
                s.repack = True
            elif key == "no_host":
                s.use_host = False
            elif key == "no_op_offload":
                s.op_offload = False
            elif key == "op_offload":
                s.op_offload = True
            elif key == "no_mmap":
                s.load_mode = out.load_mode = "none"  # older builds' spelling
            elif key == "mlock":
                s.load_mode = out.load_mode = "mlock"
            else:
                out.ignored.append(flag)
        elif flag in _FA:
            nxt = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
            if nxt.lower() in ("on", "off", "auto", "1", "0", "true", "false", "enabled", "disabled"):
                if not eq:
                    i += 1
                s.flash_attn = {"1": "on", "true": "on", "enabled": "on", "0": "off", "false": "off",
                                "disabled": "off"}.get(nxt.lower(), nxt.lower())
            else:
                s.flash_attn = "on"  # old builds: a bare -fa switched it on
        elif flag in _IGNORED_VALUE:
            out.ignored.append(flag)
            if not eq:
                i += 1
        elif flag in _IGNORED_SWITCHES:
            out.ignored.append(flag)
        else:
            out.unknown.append(raw)
        i += 1
    return out


def settings_from_args(argv: list[str], tool: str = "server") -> LlamaSettings:
    return parse_llama_args(argv, tool).settings
