"""The full llama.cpp argument list for a placement: ``llama-server``, ``llama-cli`` or ``llama-bench``.

Takes the placement part as :class:`~app.command.spec.PlacementArgs` (what
:func:`app.placement.export.placement_args` computes and verifies) plus the
:class:`~app.memory.settings.LlamaSettings`; :func:`app.placement.command.build_command`
is the same for a :class:`~app.placement.placement.Placement`.

Only flags the user's build accepts are emitted, in a spelling it knows
(:mod:`app.command.accepts`); what a build cannot express is reported in
``notes`` (or raised, when leaving it out would change where tensors land).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..llamacpp.capabilities import UNKNOWN, Capabilities
from ..memory.settings import NGL_ALL, NGL_AUTO, LlamaSettings
from .accepts import accepts, need, spelling
from .flags import spellings
from .spec import InexpressibleError, PlacementArgs

__all__ = ["PROGRAMS", "Command", "apply_cuda_order", "build_llama_command"]

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
    dev_flags, ot_flags = spellings("-dev"), spellings("-ot")

    def rename(name: str) -> str:
        if name.startswith("CUDA") and name[4:].isdigit():
            if name not in mapping:
                raise InexpressibleError(
                    f"{name} holds part of this placement but CUDA_VISIBLE_DEVICES="
                    f"{','.join(map(str, order))} hides it; show it or move its blocks."
                )
            return mapping[name]
        return name

    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        out.append(a)
        if a in dev_flags and i + 1 < len(argv):
            sep = "/" if "/" in argv[i + 1] else ","
            out.append(sep.join(rename(x) for x in argv[i + 1].split(sep)))
            i += 2
            continue
        if a in ot_flags and i + 1 < len(argv):
            items = []
            for item in argv[i + 1].replace(";", "\x00").split("\x00"):
                pat, _, buft = item.rpartition("=")
                items.append(f"{pat}={rename(buft)}" if pat else item)
            out.append(";".join(items))
            i += 2
            continue
        i += 1
    return out, {"CUDA_VISIBLE_DEVICES": ",".join(map(str, order))}


def _draft_args(s: LlamaSettings, caps: Capabilities) -> list[str]:
    """The draft model's flags (speculative decoding with ``-md``), only those that differ from llama.cpp's
    defaults; the draft's context follows the main model's other flags (:mod:`app.memory.draft`)."""
    from ..remote.names import model_arguments

    path = s.draft_model or ""
    if model_arguments(path)[0] != "-m":
        raise InexpressibleError(
            f"the draft model {path} is a remote name: download it first and give its file with -md "
            "(Layerdeck writes -md only for local files)"
        )
    argv = [need(caps, "-md"), path]
    if s.draft_devices:
        argv += [need(caps, "-devd"), ",".join(s.draft_devices)]
    if s.draft_n_gpu_layers != NGL_AUTO:
        argv += [need(caps, "-ngld"), "all" if s.draft_n_gpu_layers == NGL_ALL else str(s.draft_n_gpu_layers)]
    for pat, buft in s.draft_overrides:
        argv += [need(caps, "-otd"), f"{pat}={buft}"]
    return argv + _spec_args(s, caps)


def _spec_args(s: LlamaSettings, caps: Capabilities) -> list[str]:
    """The speculative flags that hold with or without ``-md``: the draft context's cache types (the MTP context
    of draft-mtp takes them too), the types and the drafted tokens (also draft-mtp's snapshots, ``n_rs_seq``)."""
    argv: list[str] = []
    drafting = bool(s.draft_model) or s.load_mtp
    if drafting and s.draft_type_k != "f16":
        argv += [need(caps, "-ctkd"), s.draft_type_k]
    if drafting and s.draft_type_v != "f16":
        argv += [need(caps, "-ctvd"), s.draft_type_v]
    if s.spec_types:
        argv += [need(caps, "--spec-type"), ",".join(s.spec_types)]
    if s.spec_draft_n_max != 3:
        argv += [need(caps, "--spec-draft-n-max"), str(s.spec_draft_n_max)]
    if not s.spec_draft_backend_sampling:
        argv.append(need(caps, "--no-spec-draft-backend-sampling"))
    return argv


def _projector_args(s: LlamaSettings, caps: Capabilities) -> list[str]:
    """The projector's flags (``--mmproj`` and where it runs), only those that differ from llama.cpp's defaults."""
    from ..remote.names import model_arguments

    path = s.mmproj or ""
    if model_arguments(path)[0] != "-m":
        raise InexpressibleError(
            f"the projector {path} is a remote name: download it first and give its file with --mmproj"
        )
    argv = [need(caps, "--mmproj"), path]
    if not s.mmproj_offload:
        argv.append(need(caps, "--no-mmproj-offload"))
    elif s.mmproj_device:
        argv += [need(caps, "-mmdev"), s.mmproj_device]
    if s.image_min_tokens is not None:
        argv += [need(caps, "--image-min-tokens"), str(s.image_min_tokens)]
    if s.image_max_tokens is not None:
        argv += [need(caps, "--image-max-tokens"), str(s.image_max_tokens)]
    return argv


def build_llama_command(
    pa: PlacementArgs,
    s: LlamaSettings,
    model_path: str | os.PathLike,
    *,
    tool: str = "server",
    rpc: list[str] | None = None,
    program: str | None = None,
    caps: Capabilities = UNKNOWN,
    host: str | None = None,
    port: int | None = None,
    extra: list[str] | None = None,
    cuda_order: list[int] | None = None,
    has_lanes: bool = False,
) -> Command:
    """Argument list (program first) with placement ``pa`` and settings ``s``.

    ``has_lanes``: the placement has GPU/RPC lanes, so when ``pa`` uses none, ``-dev none`` keeps llama.cpp
    from choosing devices itself. ``cuda_order``: only when the user asked to hide or reorder GPUs (see
    :func:`apply_cuda_order`).
    """
    if tool not in PROGRAMS:
        raise ValueError(f"unknown tool {tool!r}; use one of {', '.join(PROGRAMS)}")
    notes = list(pa.notes)
    from ..remote.names import model_arguments  # -m PATH, or -hf ORG/REPO:QUANT for a model read over HTTP

    argv = [program or PROGRAMS[tool], *model_arguments(os.fspath(model_path))]

    if rpc:
        argv += [need(caps, "--rpc"), ",".join(rpc)]
    bench = tool == "bench"
    if pa.devices:
        argv += [need(caps, "-dev"), ("/" if bench else ",").join(pa.devices)]
    elif has_lanes:
        argv += [need(caps, "-dev"), "none"]
    argv += [need(caps, "-ngl"), str(pa.n_gpu_layers)]
    if pa.tensor_split:
        argv += [need(caps, "-ts"), _fmt_ts(pa.tensor_split, "/" if bench else ",")]
    if pa.overrides:
        flag = need(caps, "-ot")
        if bench:
            # llama-bench reads ',' as separate test variants: one run's overrides are joined with ';'
            argv += [flag, ";".join(f"{pat}={buft}" for pat, buft in pa.overrides)]
        else:
            for pat, buft in pa.overrides:
                argv += [flag, f"{pat}={buft}"]
    if pa.n_cpu_moe:
        argv += [need(caps, "-ncmoe"), str(pa.n_cpu_moe)]
    if pa.cpu_moe:
        argv.append(need(caps, "-cmoe"))
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
            argv += [need(caps, "-c"), str(s.n_ctx)]
        if tool == "server":
            if s.n_parallel and s.n_parallel > 0:
                argv += [need(caps, "-np"), str(s.n_parallel)]
            kvu = spelling(caps, "-kvu")
            if s.kv_unified is True and kvu:
                argv.append(kvu)
            # kv_unified False with an explicit -np: -np already means non-unified
        if s.type_k != "f16":
            argv += [need(caps, "-ctk"), s.type_k]
        if s.type_v != "f16":
            argv += [need(caps, "-ctv"), s.type_v]
        if s.flash_attn in ("on", "off"):
            if caps.fa_value:
                argv += [need(caps, "-fa"), s.flash_attn]
            elif s.flash_attn == "on":
                argv.append(need(caps, "-fa"))  # older builds: a bare switch, off by default
        if s.load_mode:
            lm = spelling(caps, "-lm")
            if lm is not None:
                argv += [lm, s.load_mode]
            elif s.load_mode == "none" and accepts(caps, "--no-mmap"):
                argv.append("--no-mmap")
            elif s.load_mode == "mlock" and accepts(caps, "--mlock"):
                argv.append("--mlock")
            else:
                notes.append(f"this build cannot set load mode {s.load_mode}; it uses its default")
        if s.n_batch != 2048:
            argv += [need(caps, "-b"), str(s.n_batch)]
        if s.n_ubatch != 512:
            argv += [need(caps, "-ub"), str(s.n_ubatch)]
        if s.swa_full:
            argv.append(need(caps, "--swa-full"))
        if s.no_kv_offload:
            argv.append(need(caps, "-nkvo"))
        if s.n_threads:
            argv += [need(caps, "-t"), str(s.n_threads)]
        if s.mmproj and tool in ("server", "cli"):
            argv += _projector_args(s, caps)
        if s.draft_model and tool in ("server", "cli"):
            argv += _draft_args(s, caps)
        elif s.spec_types and tool in ("server", "cli"):
            argv += _spec_args(s, caps)
        fit = spelling(caps, "--fit")
        if fit:
            argv += [fit, "off"]
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
        notes.append(
            f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}: device names above are as llama.cpp "
            "numbers the GPUs it can see"
        )
    return Command(argv, env, notes, pa)
