"""The full llama.cpp command for a placement: ``llama-server``, ``llama-cli`` or ``llama-bench``.

Only flags the user's build accepts are emitted (:mod:`app.llamacpp.capabilities`);
what a build cannot express is reported in ``notes`` (or raised, when leaving
it out would change where tensors land).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..llamacpp.capabilities import UNKNOWN, Capabilities
from ..memory.settings import LlamaSettings
from .export import InexpressibleError, PlacementArgs, placement_args
from .placement import Placement

PROGRAMS = {"server": "llama-server", "cli": "llama-cli", "bench": "llama-bench"}


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    placement_args: PlacementArgs | None = None


def _fmt_ts(ts: list[int], sep: str) -> str:
    return sep.join(str(x) for x in ts)


def apply_cuda_order(argv: list[str], order: list[int]) -> tuple[list[str], dict[str, str]]:
    """Hide or reorder NVIDIA GPUs with ``CUDA_VISIBLE_DEVICES``, renaming CUDA devices in the arguments.

    ``order`` lists the CUDA indices (as numbered without the variable) to expose, in the order wanted:
    ``[2, 0]`` makes today's CUDA2 the new CUDA0 and CUDA0 the new CUDA1, and hides CUDA1.
    """
    mapping = {f"CUDA{old}": f"CUDA{new}" for new, old in enumerate(order)}

    def rename(name: str) -> str:
        if name.startswith("CUDA") and name[4:].isdigit():
            if name not in mapping:
                raise InexpressibleError(f"{name} holds part of this placement but CUDA_VISIBLE_DEVICES="
                                         f"{','.join(map(str, order))} hides it; show it or move its blocks.")
            return mapping[name]
        return name

    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        out.append(a)
        if a in ("-dev", "--device") and i + 1 < len(argv):
            sep = "/" if "/" in argv[i + 1] else ","
            out.append(sep.join(rename(x) for x in argv[i + 1].split(sep)))
            i += 2
            continue
        if a in ("-ot", "--override-tensor") and i + 1 < len(argv):
            items = []
            for item in argv[i + 1].replace(";", "\x00").split("\x00"):
                pat, _, buft = item.rpartition("=")
                items.append(f"{pat}={rename(buft)}" if pat else item)
            out.append(";".join(items))
            i += 2
            continue
        i += 1
    return out, {"CUDA_VISIBLE_DEVICES": ",".join(map(str, order))}


def build_command(p: Placement, model_path: str | os.PathLike, *, tool: str = "server", rpc: list[str] | None = None,
                  program: str | None = None, caps: Capabilities = UNKNOWN, host: str | None = None,
                  port: int | None = None, extra: list[str] | None = None,
                  cuda_order: list[int] | None = None) -> Command:
    """Argument list (program first) that reproduces ``p`` exactly.

    ``cuda_order``: only when the user asked to hide or reorder GPUs (see :func:`apply_cuda_order`).
    """
    if tool not in PROGRAMS:
        raise ValueError(f"unknown tool {tool!r}; use one of {', '.join(PROGRAMS)}")
    pa = placement_args(p)
    s: LlamaSettings = p.settings
    notes = list(pa.notes)
    argv = [program or PROGRAMS[tool], "-m", os.fspath(model_path)]

    def need(flag: str, *alts: str) -> str:
        got = caps.first(flag, *alts)
        if got is None:
            raise InexpressibleError(f"this llama.cpp build does not accept {flag}, which this placement needs; "
                                     "update llama.cpp.")
        return got

    if rpc:
        argv += [need("--rpc"), ",".join(rpc)]
    bench = tool == "bench"
    if pa.devices:
        argv += [need("-dev", "--device"), ("/" if bench else ",").join(pa.devices)]
    elif p.devices:
        argv += [need("-dev", "--device"), "none"]
    argv += [need("-ngl", "--n-gpu-layers"), str(pa.n_gpu_layers)]
    if pa.tensor_split:
        argv += [need("-ts", "--tensor-split"), _fmt_ts(pa.tensor_split, "/" if bench else ",")]
    if pa.overrides:
        flag = need("-ot", "--override-tensor")
        if bench:
            # llama-bench reads ',' as separate test variants: one run's overrides are joined with ';'
            argv += [flag, ";".join(f"{pat}={buft}" for pat, buft in pa.overrides)]
        else:
            for pat, buft in pa.overrides:
                argv += [flag, f"{pat}={buft}"]
    if pa.n_cpu_moe:
        argv += [need("-ncmoe", "--n-cpu-moe"), str(pa.n_cpu_moe)]
    if pa.cpu_moe:
        argv.append(need("-cmoe", "--cpu-moe"))
    if bench:
        argv += ["-fa", "1" if s.flash_attn == "on" else "0"] if s.flash_attn in ("on", "off") else []
        argv += ["-ctk", s.type_k, "-ctv", s.type_v, "-ub", str(s.n_ubatch), "-b", str(s.n_batch)]
        if s.n_threads:
            argv += ["-t", str(s.n_threads)]
        if s.n_ctx:
            argv += ["-d", "0"]
            notes.append("llama-bench measures at the depths given by -d, not at a context size; -c is not used")
    else:
        if s.n_ctx:
            argv += [need("-c", "--ctx-size"), str(s.n_ctx)]
        if tool == "server":
            if s.n_parallel and s.n_parallel > 0:
                argv += [need("-np", "--parallel"), str(s.n_parallel)]
            if s.kv_unified is True and caps.has("-kvu"):
                argv.append("-kvu")
            elif s.kv_unified is False and (s.n_parallel or -1) > 0 and caps.has("-no-kvu"):
                pass  # explicit -np already means non-unified
        if s.type_k != "f16":
            argv += [need("-ctk", "--cache-type-k"), s.type_k]
        if s.type_v != "f16":
            argv += [need("-ctv", "--cache-type-v"), s.type_v]
        if s.flash_attn in ("on", "off"):
            if caps.fa_value:
                argv += [need("-fa", "--flash-attn"), s.flash_attn]
            elif s.flash_attn == "on":
                argv.append(need("-fa", "--flash-attn"))  # older builds: a bare switch, off by default
        if s.load_mode:
            if caps.has("--load-mode") or caps.has("-lm"):
                argv += [caps.first("-lm", "--load-mode"), s.load_mode]
            elif s.load_mode == "none" and caps.has("--no-mmap"):
                argv.append("--no-mmap")
            elif s.load_mode == "mlock" and caps.has("--mlock"):
                argv.append("--mlock")
            else:
                notes.append(f"this build cannot set load mode {s.load_mode}; it uses its default")
        if s.n_batch != 2048:
            argv += [need("-b", "--batch-size"), str(s.n_batch)]
        if s.n_ubatch != 512:
            argv += [need("-ub", "--ubatch-size"), str(s.n_ubatch)]
        if s.swa_full:
            argv.append(need("--swa-full"))
        if s.no_kv_offload:
            argv.append(need("-nkvo", "--no-kv-offload"))
        if s.n_threads:
            argv += [need("-t", "--threads"), str(s.n_threads)]
        if caps.has("--fit"):
            argv += ["--fit", "off"]
        else:
            notes.append("this build has no --fit, so it cannot change the placement on its own")
        if tool == "server":
            if host:
                argv += ["--host", host]
            if port is not None:
                argv += ["--port", str(port)]
    argv += list(extra or [])
    env: dict[str, str] = {}
    if cuda_order is not None:
        argv, env = apply_cuda_order(argv, cuda_order)
        notes.append(f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}: device names above are as llama.cpp "
                     "numbers the GPUs it can see")
    return Command(argv, env, notes, pa)
