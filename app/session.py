"""One open model being planned: the state every front end shows, and the only way to change it.

A :class:`Session` holds the model, its lanes (devices), the placement with
its llama.cpp settings, the undo history, the current memory estimate and
speed prediction, the drag preview and llama.cpp's second opinion. Every
change a user makes — a move, a preset, a pin, a setting, the device list,
an imported command, an opened plan — is one labelled, undoable edit on the
history. After each change the session recomputes what depends on it and
tells its listeners what changed with a :class:`SessionEvent`, so a view
redraws only what it shows.

It imports no GUI toolkit: the Qt adapter (:mod:`ui.document`) turns events
into signals, and the CLI drives the same object from a script::

    s = Session.open("model.gguf", devices=parse_device_spec("CUDA0=24576"))
    s.move(["12:experts"], CPU)
    s.set_settings(n_ctx=16384)
    s.undo()
    print(s.export("bash"))

The session owns the per-model caches that make re-estimation fast (an
:class:`~app.memory.estimator.Estimator`, :class:`~app.speed.predict.SpeedFacts`
and an :class:`~app.placement.export.ExportCache`); they die with it.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .command.formats import parse_command_text, render
from .command.values import check_settings
from .errors import CommandError, LayerdeckError
from .lanes import CPU, Lane, rpc_endpoints
from .memory.draft import DFLASH_SPEC_TYPES, detected_spec_types, spec_type_for, spec_type_of
from .memory.estimator import Estimate, Estimator
from .memory.layout import WeightPlacement
from .memory.settings import LlamaSettings
from .model import Model, Role, open_model
from .model.projector import Projector, open_projector
from .placement import Placement
from .placement.command import Command, build_command
from .placement.export import ExportCache, InexpressibleError, PlacementArgs, placement_args
from .placement.history import History, edit_to, move_command, pin_command
from .placement.plan_file import LaunchProfile, PlanError, from_dict, launch_from_dict, read_plan, save_plan
from .placement.second_opinion import Opinion

if TYPE_CHECKING:
    from .llamacpp.fit_print import FitRow
    from .memory.learned import DryRunCorrection, LearnedStore, Verification
    from .placement.dry_run import DryRunJob
from .speed.predict import DecodePrediction, PromptPrediction, SpeedFacts, SpeedParams, predict_decode, predict_prompt
from .speed.speculative import (
    ASSISTANT_BOUND,
    DEFAULT_ACCEPTANCE,
    DFLASH_BOUND,
    DSV4_DSPARK_BOUND,
    EAGLE3_BOUND,
    POLL_ADVICE,
    SpeculativeDecode,
    dflash_n_draft,
    dflash_passes,
    eagle3_passes,
    mtp_decode,
    mtp_n_draft,
    speculative_decode,
    step_decode,
)

log = logging.getLogger(__name__)

#: The llama.cpp settings an imported command carries over besides the placement itself.
IMPORTED_SETTINGS = (
    "n_ctx",
    "n_parallel",
    "kv_unified",
    "type_k",
    "type_v",
    "flash_attn",
    "n_batch",
    "n_ubatch",
    "swa_full",
    "no_kv_offload",
    "draft_model",
    "draft_n_gpu_layers",
    "draft_devices",
    "draft_overrides",
    "draft_type_k",
    "draft_type_v",
    "spec_types",
    "spec_draft_n_max",
    "mmproj",
    "mmproj_offload",
    "mmproj_device",
    "image_min_tokens",
    "image_max_tokens",
)

#: Short labels for settings edits ("Set context 16384").
_SETTING_LABELS = {
    "n_ctx": "context",
    "n_parallel": "slots",
    "kv_unified": "unified KV",
    "type_k": "K cache type",
    "type_v": "V cache type",
    "flash_attn": "flash attention",
    "n_batch": "batch",
    "n_ubatch": "micro-batch",
    "swa_full": "full SWA cache",
    "no_kv_offload": "KV on the CPU",
}


def _setting_value(key: str, value: object) -> str:
    """A setting's value as an undo label says it: on/off, auto for ``n_parallel`` -1, default for None."""
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "on" if value else "off"
    if key == "n_parallel" and value == -1:
        return "auto"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


class Change(enum.Flag):
    """What a :class:`SessionEvent` says changed."""

    NONE = 0
    PLACEMENT = enum.auto()  # where tensors or layers go
    SETTINGS = enum.auto()  # llama.cpp settings (context, slots, cache types...)
    DEVICES = enum.auto()  # the lane list or a lane's capacity
    ESTIMATE = enum.auto()  # the memory estimate and speed prediction were recomputed
    HISTORY = enum.auto()  # undo/redo labels or the saved state
    PREVIEW = enum.auto()  # the drag preview started, changed or ended
    OPINION = enum.auto()  # llama.cpp's dry-run numbers arrived or were cleared
    MACHINE = enum.auto()  # a machine figure (RAM bandwidth, calibration) changed the speed model
    MESSAGE = enum.auto()  # only a sentence for the user

    @classmethod
    def edit(cls) -> Change:
        """Everything an edit can change."""
        return cls.PLACEMENT | cls.SETTINGS | cls.DEVICES | cls.ESTIMATE | cls.HISTORY


@dataclass(frozen=True)
class SessionEvent:
    changes: Change
    message: str | None = None


@dataclass(frozen=True)
class Overflow:
    """A lane whose estimated use exceeds its capacity less the margin."""

    lane: str
    used: int
    capacity: int
    margin: int
    hint: str = ""  # which blocks to move off, in words ("" when there is no single answer)

    @property
    def excess(self) -> int:
        return self.used - (self.capacity - self.margin)


@dataclass(frozen=True)
class Preview:
    """The board as it would be after a drop."""

    items: tuple[str, ...]
    lane: str
    estimate: Estimate | None
    decode: DecodePrediction | None
    reason: str | None = None  # why the drop is refused (estimate is None then)


class ImportChanged(LayerdeckError, RuntimeError):
    """A prepared import no longer fits the session (another model or other devices since)."""


@dataclass(frozen=True)
class ImportResult:
    """What an imported command did: its warnings, the arguments kept for the launch, the model it named."""

    warnings: tuple[str, ...]
    extra: tuple[str, ...]  # flags Layerdeck does not place (sampling, templates...), kept as extra arguments
    model: str | None  # the -m of the command (None when it had none)
    other_model: bool  # that -m names a different file than the open model


@dataclass(frozen=True)
class PreparedImport:
    """A pasted command read and laid out, not yet applied (:meth:`Session.prepare_import`): the slow part
    (parsing, every ``-ot`` pattern matched against the tensor names) can run off the GUI thread."""

    placement: Placement
    settings: LlamaSettings
    profile: LaunchProfile
    warnings: tuple[str, ...]
    model: str | None
    other_model: bool
    basis: tuple  # the model and devices it was laid out for
    draft: Estimator | None = None  # the draft model the command names (-md), opened
    projector: Projector | None = None  # the projector it names (--mmproj), opened


def split_launch_args(argv: Sequence[str], tool: str = "server") -> tuple[LaunchProfile, list[str]]:
    """From a llama.cpp argument list (program first or not), the launch profile it sets (``--port``,
    ``--host``, ``--api-key``, every flag Layerdeck does not place, unknown flags with their values) and the
    warnings about it. Placement and memory flags are left out: they are the placement's."""
    from .command.flags import lookup

    args = list(argv)
    if args and not args[0].startswith("-"):
        args.pop(0)
    prof = LaunchProfile()
    notes: list[str] = []
    i = 0
    while i < len(args):
        raw = args[i]
        hit = lookup(raw.partition("=")[0] if raw.startswith("--") and "=" in raw else raw)
        if hit is None:
            # unknown to the flag table: kept with the values that follow it (llama-server will judge it)
            j = i + 1
            while j < len(args) and not args[j].startswith("-"):
                j += 1
            prof.extra.extend(args[i:j])
            notes.append(f"{raw} is not a flag Layerdeck knows: kept as an extra launch argument")
            i = j
            continue
        flag = hit[0]
        n = 0 if "=" in raw else flag.takes(tool)
        if flag.bare is not None:
            nxt = args[i + 1] if i + 1 < len(args) else ""
            n = 1 if nxt.lower() in (flag.choices or ()) else 0
        item = args[i : i + 1 + n]
        i += 1 + n
        if not flag.passthrough:
            continue
        name = flag.name
        value = item[0].partition("=")[2] if "=" in item[0] else (item[1] if len(item) > 1 else "")
        if name == "--port":
            try:
                port = int(value)
            except ValueError:
                port = 0
            if 1 <= port <= 65535:
                prof.port = port
                continue
            notes.append(f"--port {value!r} is not a TCP port (1-65535): ignored")
            continue
        if name == "--api-key" and value:
            if value.isascii() and value.isprintable() and " " not in value:
                prof.api_key = value
            else:
                notes.append("the --api-key value has spaces or characters an HTTP header cannot carry: not kept")
            continue
        if name == "--host" and value and not all(c.isascii() and (c.isalnum() or c in "._:[]%-") for c in value):
            notes.append(f"--host {value!r} is not an address or host name: not kept")
            continue
        if name == "--host" and value:
            prof.host = value
            continue
        prof.extra.extend(item)
    return prof, notes


def _gib(n: int) -> str:
    from .units import fmt_bytes

    return fmt_bytes(n)


class LaunchArgsError(CommandError, ValueError):
    """Extra launch arguments that cannot be used; the message says which and why."""


#: The most text the extra-arguments box takes (a command line, not a file).
MAX_EXTRA_TEXT = 16384


def parse_extra_args(text: str) -> list[str]:
    """The extra llama-server arguments typed in the launch options, split as a POSIX shell would split them
    (quotes, backslashes) but never run by one. Placement and memory flags are refused (they belong to the
    board and the KV panel), as are ``-m``, ``--rpc``, ``--port``, ``--host`` and ``--api-key`` (the launch
    options have their own boxes). Raises :class:`LaunchArgsError`."""
    from .command.flags import lookup
    from .command.shells import CommandSyntaxError

    if len(text) > MAX_EXTRA_TEXT:
        raise LaunchArgsError(f"the extra arguments are {len(text)} characters; at most {MAX_EXTRA_TEXT}")
    if "\0" in text:
        raise LaunchArgsError("the extra arguments contain a NUL character; remove it")
    if not text.strip():
        return []
    try:
        _env, argv = parse_command_text("llama-server " + text, "bash")
    except CommandSyntaxError as exc:
        raise LaunchArgsError(f"the extra arguments cannot be read: {exc}") from None
    argv = argv[1:]
    own = {
        "--port": "the Port box",
        "--host": "the Network choice",
        "--api-key": "the API key box",
        "-m": "Open model… (the command always runs the open model)",
        "--rpc": "Devices… (RPC hosts come from the device list)",
    }
    for a in argv:
        hit = lookup(a.partition("=")[0] if a.startswith("--") and "=" in a else a)
        if hit is None:
            continue
        flag = hit[0]
        if flag.name in own:
            raise LaunchArgsError(f"{a} has its own place: use {own[flag.name]}")
        if not flag.passthrough:
            raise LaunchArgsError(
                f"{a} is a placement or memory flag: set it on the board or in the KV panel, so the plan and the "
                "command agree"
            )
    return argv


@dataclass
class _Derived:
    estimate: Estimate | None = None
    error: str | None = None
    decode: DecodePrediction | None = None
    prompt: PromptPrediction | None = None
    parallel: ParallelSpeed | None = None
    speculative: SpeculativeDecode | None = None
    ms: float = 0.0


@dataclass(frozen=True)
class ParallelSpeed:
    """The server's slots all busy at once: ``n`` users, each with up to ``ctx_each`` tokens of context,
    decoding together (one batch of ``n`` tokens per step; MoE layers then touch more experts)."""

    n: int
    ctx_each: int
    per_user: float  # tokens/s each user sees (at half its context: the middle of a conversation)
    aggregate: float

    def text(self) -> str:
        return (
            f"{self.n} users at {self.ctx_each} tokens each: {self.per_user:.1f} tok/s each "
            f"({self.aggregate:.1f} in all)"
        )


class Session:
    """See the module docstring. Construct with :meth:`open` or directly from a model and its lanes."""

    def __init__(
        self,
        model: Model,
        devices: Sequence[Lane],
        placement: Placement | None = None,
        settings: LlamaSettings | None = None,
        host_capacity: int | None = None,
        host_bandwidth: float | None = None,
        margin: int = 0,
        draft: Model | None = None,
        projector: Projector | None = None,
    ):
        from .placement.presets import all_on_gpus

        self.model = model
        self.host_capacity = host_capacity
        self.host_bandwidth = host_bandwidth
        self.margin = margin  # bytes each non-CPU lane keeps free (an app preference)
        self.listeners: list[Callable[[SessionEvent], None]] = []
        s = settings or LlamaSettings(n_ctx=min(model.params.n_ctx_train or 8192, 8192))
        self.placement: Placement = placement if placement is not None else all_on_gpus(model, list(devices), s)
        self.history = History(self.placement)
        self.history.listeners.append(self._on_history)
        self.estimator = Estimator(model, draft, projector)  # the -md model and --mmproj file, when open
        #: the share of drafted tokens the target accepts, for the speculative speed (a user-set figure)
        self.draft_acceptance = DEFAULT_ACCEPTANCE
        self._draft_facts: tuple[Model, SpeedFacts] | None = None
        self.speed_facts = SpeedFacts(model)
        self.export_cache = ExportCache(model, self.estimator.matcher)
        self.plan_path: str | None = None
        #: how llama-server is started besides the placement (port, host, API key, extra arguments); saved
        #: with the plan
        self.launch_profile = LaunchProfile()
        self._launch_dirty = False
        self.opinion: Opinion | None = None  # llama.cpp's dry run for the current state
        self.opinion_error: str | None = None
        #: figures learned from dry runs of the user's llama.cpp (app.memory.learned); None: not used
        self.learned: LearnedStore | None = None
        self.learned_build: str | None = None  # the llama.cpp build they are taken from
        self.verification: Verification | None = None  # which figures of the estimate are llama.cpp's
        self.last_correction: DryRunCorrection | None = None  # what the last dry run changed, MiB per device
        self._model_id: str | None = None
        self.preview_state: Preview | None = None
        self._speed_params: SpeedParams | None = None
        #: what the machine figures could not use (a calibration file of the wrong shape...), for the user
        self.machine_notes: list[str] = []
        self.calibrated = False  # whether the speed model uses this machine's saved calibration
        self._derived = _Derived()
        self._state = self.placement.snapshot()
        self._recompute()

    @classmethod
    def open(cls, path: str | os.PathLike, devices: Sequence[Lane] = (), **kw) -> Session:
        """A session on the model at ``path`` (any shard of a split set), laid out on ``devices``."""
        return cls(open_model(path), list(devices), **kw)

    # ------------------------------------------------------------------ events

    def subscribe(self, fn: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Call ``fn(event)`` after every change; returns a function that unsubscribes."""
        self.listeners.append(fn)
        return lambda: self.listeners.remove(fn) if fn in self.listeners else None

    def _emit(self, changes: Change, message: str | None = None) -> None:
        ev = SessionEvent(changes, message)
        for fn in list(self.listeners):
            fn(ev)

    def say(self, message: str) -> None:
        self._emit(Change.MESSAGE, message)

    # ------------------------------------------------------------------ state

    @property
    def devices(self) -> list[Lane]:
        """The lanes other than the CPU; part of the placement state, so undo restores them too."""
        return self.placement.devices

    @property
    def lanes(self) -> list[str]:
        return self.placement.lanes

    @property
    def estimate(self) -> Estimate | None:
        return self._derived.estimate

    @property
    def estimate_error(self) -> str | None:
        return self._derived.error

    @property
    def decode(self) -> DecodePrediction | None:
        return self._derived.decode

    @property
    def prompt(self) -> PromptPrediction | None:
        return self._derived.prompt

    @property
    def last_estimate_ms(self) -> float:
        return self._derived.ms

    @property
    def dirty(self) -> bool:
        return self.history.dirty or self._launch_dirty

    @property
    def undo_label(self) -> str | None:
        return self.history.undo_label

    @property
    def redo_label(self) -> str | None:
        return self.history.redo_label

    def rpc_endpoints(self) -> list[str]:
        return rpc_endpoints(self.devices)

    def capacity(self, lane: str) -> int | None:
        """Bytes a lane can hold: host RAM for the CPU, free (else total) memory for a device."""
        if lane == CPU:
            return self.host_capacity
        d = next((d for d in self.devices if d.name == lane), None)
        return d.capacity if d else None

    def margin_of(self, lane: str) -> int:
        return 0 if lane == CPU else self.margin

    # ------------------------------------------------------------------ derived figures

    @property
    def speed_params(self) -> SpeedParams:
        """The speed model's machine figures for these lanes (calibration and RAM bandwidth included)."""
        if self._speed_params is None:
            from .speed.params import load_calibration, speed_params

            notes: list[str] = []
            calibration = load_calibration(self.devices, notes)
            self._speed_params = speed_params(self.devices, self.host_bandwidth, calibration)
            self.calibrated = calibration is not None
            self.machine_notes = notes
        return self._speed_params

    def estimate_settings(self, settings: LlamaSettings) -> Estimate:
        """The estimate for llama.cpp run with ``settings`` as given: its own -ngl/-ts/-dev/-ot rules decide
        where tensors go (what ``layerdeck estimate -- ARGS`` reports)."""
        return self.estimator.estimate(self.devices, settings)

    def estimate_for(self, p: Placement) -> Estimate:
        return self.estimator.estimate(p.devices, p.settings, p.weight_placement())

    def speed_for(self, p: Placement) -> tuple[DecodePrediction | None, PromptPrediction | None]:
        """(decode, prompt) predictions for ``p``, or (None, None) when the model cannot say."""
        try:
            return self.speed_of(p.weight_placement(), p.settings)
        except ValueError as exc:
            log.info("no speed prediction: %s", exc)
            return None, None

    def parallel_speed(self, p: Placement, est: Estimate) -> ParallelSpeed | None:
        """Per-user and aggregate decode speed with every slot of ``p`` busy (None with one slot)."""
        st, shape = p.settings, est.shape
        n = st.eff_n_parallel
        if n <= 1:
            return None
        each = shape.n_ctx if shape.unified else shape.n_ctx_seq
        each = min(each, shape.n_ctx // n) if shape.unified else each  # a unified cache shares its cells
        try:
            dec = predict_decode(
                self.model,
                p.weight_placement(),
                self.speed_params,
                depth=max(1, each // 2),
                facts=self.speed_facts,
                threads=st.n_threads,
                n_seq=n,
            )
        except (ValueError, ZeroDivisionError) as exc:
            log.info("no parallel speed prediction: %s", exc)
            return None
        return ParallelSpeed(n, each, dec.tokens_per_s / n, dec.tokens_per_s)

    def speculative_speed(self, p: Placement, est: Estimate, decode: DecodePrediction) -> SpeculativeDecode | None:
        """Decode speed with the draft model drafting ``--spec-draft-n-max`` tokens a step at the user's
        acceptance rate (:attr:`draft_acceptance`); None without a draft in use (``--spec-type draft-simple``
        with ``-md``, or ``draft-mtp`` on the model's own NextN layers: :meth:`_mtp_speed`)."""
        drafter = self.estimator.draft
        st = p.settings
        if drafter is None and est.draft is not None and est.draft.shape.mtp and "draft-mtp" in st.spec_types:
            return self._mtp_speed(p, est, decode)
        if drafter is None or est.draft is None:
            return None
        # the type that drafts with this file: an EAGLE-3 head's draft-eagle3 (app.speed.speculative.eagle3_passes),
        # a DFlash head's draft-dflash / draft-dspark (dflash_passes: the whole block in one pass), Gemma 4's
        # assistant's draft-mtp (each pass is the whole assistant, its lm_head included, and there is no catch-up
        # pass as it reads the target's cache: the draft-simple formula), else draft-simple
        wanted = spec_type_of(drafter.model)
        types = st.spec_types or detected_spec_types(drafter.model)
        if wanted not in types:
            return None
        n = st.spec_draft_n_max
        if wanted in DFLASH_SPEC_TYPES:
            n = dflash_n_draft(drafter.model, n, wanted == "draft-dspark")
        try:
            params = self.speed_params
            verify = predict_decode(
                self.model, p.weight_placement(), params, facts=self.speed_facts, threads=st.n_threads, n_seq=n + 1
            )
            cpu = params.cpu
            # both run layers on the CPU (the embedding lookup alone does not keep the thread pool busy)
            both_on_cpu = CPU in est.placement.layer_device and CPU in est.draft.placement.layer_device
            few_cores = cpu is not None and (cpu.physical_cores or 0) <= 8
            notes = (POLL_ADVICE,) if both_on_cpu and few_cores else ()
            if wanted == "draft-eagle3" or wanted in DFLASH_SPEC_TYPES:
                pair = (drafter.model, est.draft.placement, self.model, p.weight_placement(), params)
                if wanted == "draft-eagle3":
                    draft_s, catchup = eagle3_passes(*pair, n, st.n_threads)
                    bound = EAGLE3_BOUND
                else:
                    draft_s, catchup = dflash_passes(*pair, n, wanted == "draft-dspark", st.n_threads)
                    bound = DSV4_DSPARK_BOUND if drafter.model.params.hc_mult > 0 else DFLASH_BOUND
                return step_decode(
                    decode.seconds_per_token,
                    verify.seconds_per_token,
                    draft_s,
                    catchup,
                    n,
                    self.draft_acceptance,
                    notes,
                    measured=bound,
                )
            if self._draft_facts is None or self._draft_facts[0] is not drafter.model:
                self._draft_facts = (drafter.model, SpeedFacts(drafter.model))
            drafted = predict_decode(
                drafter.model, est.draft.placement, params, facts=self._draft_facts[1], threads=st.n_threads
            )
            return speculative_decode(
                decode.seconds_per_token,
                verify.seconds_per_token,
                drafted.seconds_per_token,
                n,
                self.draft_acceptance,
                notes,
                ASSISTANT_BOUND if wanted == "draft-mtp" else "",
            )
        except (ValueError, ZeroDivisionError) as exc:
            log.info("no speculative speed prediction: %s", exc)
            return None

    def _mtp_speed(self, p: Placement, est: Estimate, decode: DecodePrediction) -> SpeculativeDecode | None:
        """draft-mtp: the model's NextN layers draft (app.speed.speculative.mtp_decode), the target verifies
        ``n + 1`` as for ``-md``."""
        st = p.settings
        n = mtp_n_draft(self.model, st.spec_draft_n_max)
        try:
            params = self.speed_params
            wp = p.weight_placement()
            verify = predict_decode(self.model, wp, params, facts=self.speed_facts, threads=st.n_threads, n_seq=n + 1)
            return mtp_decode(
                self.model,
                wp,
                params,
                decode.seconds_per_token,
                verify.seconds_per_token,
                n,
                self.draft_acceptance,
                self.speed_facts,
                st.n_threads,
            )
        except (ValueError, ZeroDivisionError) as exc:
            log.info("no MTP speculative speed prediction: %s", exc)
            return None

    @property
    def speculative(self) -> SpeculativeDecode | None:
        """:meth:`speculative_speed` of the current placement (None without a draft in use)."""
        return self._derived.speculative

    def set_draft_acceptance(self, rate: float) -> None:
        """The share of drafted tokens the target accepts (a figure the user sets, 0-1): a speed assumption,
        not an edit of the plan."""
        rate = min(max(float(rate), 0.0), 1.0)
        if rate != self.draft_acceptance:
            self.draft_acceptance = rate
            self._recompute()
            self._emit(Change.ESTIMATE)

    @property
    def parallel(self) -> ParallelSpeed | None:
        """:meth:`parallel_speed` of the current placement (None with one slot)."""
        return self._derived.parallel

    def speed_of(
        self, wp: WeightPlacement, settings: LlamaSettings
    ) -> tuple[DecodePrediction | None, PromptPrediction | None]:
        """(decode, prompt) predictions for tensors placed as ``wp`` (an estimate's placement) with ``settings``;
        neither where either cannot be made."""
        try:
            params = self.speed_params
            return (
                predict_decode(self.model, wp, params, facts=self.speed_facts, threads=settings.n_threads),
                predict_prompt(
                    self.model,
                    wp,
                    params,
                    settings.n_ubatch,
                    settings.op_offload,
                    facts=self.speed_facts,
                    threads=settings.n_threads,
                ),
            )
        except (ValueError, ZeroDivisionError) as exc:
            log.info("no speed prediction: %s", exc)
            return None, None

    def _recompute(self) -> None:
        t0 = time.perf_counter()
        d = _Derived()
        try:
            d.estimate = self.estimate_for(self.placement)
        except (LayerdeckError, ValueError) as exc:
            d.error = str(exc)
        d.decode, d.prompt = self.speed_for(self.placement)
        if d.estimate is not None and d.decode is not None:
            d.parallel = self.parallel_speed(self.placement, d.estimate)
            d.speculative = self.speculative_speed(self.placement, d.estimate, d.decode)
        if d.estimate is not None:
            d.estimate.notes.extend(n for n in self.machine_notes if n not in d.estimate.notes)
            d.estimate = self._apply_learned(d.estimate)
        d.ms = (time.perf_counter() - t0) * 1000
        self._derived = d

    def set_host_bandwidth(self, bw: float) -> None:
        """A measured host RAM bandwidth (bytes/s): a machine figure, not an edit."""
        self.host_bandwidth = bw
        self.recalibrated()

    def recalibrated(self) -> None:
        """The speed calibration on disk changed: predict again with it."""
        self._speed_params = None
        self._recompute()
        self._emit(Change.MACHINE | Change.ESTIMATE)

    def set_margin(self, margin: int) -> None:
        """The free memory to keep on every device (an app preference, not part of the plan)."""
        if margin != self.margin:
            self.margin = max(0, int(margin))
            self._emit(Change.DEVICES)

    def overflow_hint(self, lane: str, excess: int) -> str:
        """Which blocks would have to leave ``lane`` to free ``excess`` bytes: experts from the top layer down."""
        p = self.placement
        exps = sorted(
            (
                b
                for b in self.model.blocks
                if b.role is Role.EXPERTS and p.device_of(b.id) == lane and b.id not in p.pinned
            ),
            key=lambda b: -(b.layer or 0),
        )
        freed, layers = 0, list[int]()
        for b in exps:
            if freed >= excess:
                break
            freed += b.nbytes
            layers.append(b.layer or 0)
        if not layers or freed < excess:
            return "" if not layers else f"all experts (and more) off {lane}"
        lo, hi = min(layers), max(layers)
        return f"experts of layer{'s' if len(layers) > 1 else ''} {lo}{'-' + str(hi) if hi != lo else ''} elsewhere"

    def overflows(self, est: Estimate | None = None) -> list[Overflow]:
        """Lanes over capacity (less the margin) by ``est`` (default: the current estimate)."""
        est = est if est is not None else self.estimate
        if est is None:
            return []
        return [o for o in (self.overflow_of(m.name, est) for m in est.devices) if o is not None]

    def overflow_of(self, lane: str, est: Estimate | None = None) -> Overflow | None:
        """The one over-capacity rule: ``lane``'s use by ``est`` above its capacity less the margin."""
        est = est if est is not None else self.estimate
        m = next((d for d in est.devices if d.name == lane), None) if est is not None else None
        cap = self.capacity(lane)
        margin = self.margin_of(lane)
        # a lane with nothing on it is never over (a margin larger than a small card is not "use")
        if m is None or not cap or m.total <= 0 or m.total <= cap - margin:
            return None
        return Overflow(lane, m.total, cap, margin, self.overflow_hint(lane, m.total - (cap - margin)))

    # ------------------------------------------------------------------ moves and the preview

    def check_move(self, items: Sequence[str], lane: str, verify: bool = True) -> tuple[Placement | None, str | None]:
        """The placement after moving ``items`` to ``lane``, or None and why llama.cpp cannot express it
        (``verify`` False: without the export's self-check, :func:`app.placement.export.placement_args`)."""
        trial = self.placement.copy()
        try:
            for item in items:
                trial.assign(item, lane)
            placement_args(trial, self.export_cache, verify)
        except (InexpressibleError, ValueError, KeyError) as exc:
            return None, str(exc).strip("'\"")
        why = self._refused_by_backend(trial, lane)
        if why:
            return None, why
        return trial, None

    def _refused_by_backend(self, trial: Placement, lane: str) -> str | None:
        """Why ``lane``'s backend cannot hold a weight the move puts there (a Vulkan driver's size limit): llama.cpp
        takes an -ot override as given and stops at load with "cannot run the operation"."""
        target = next((d for d in trial.devices if d.name == lane), None)
        if target is None or target.max_tensor_bytes is None:
            return None
        from .memory.backends import loader_op_sizes, refuses, weight_op
        from .units import fmt_bytes

        p = self.model.params
        for t, dev in zip(self.model.tensors, trial.weight_placement().tensor_device):
            if dev == lane and refuses(target, t, p):
                biggest = max(loader_op_sizes(t, weight_op(t.name), p))
                return (
                    f"{lane} cannot run {t.name}: its {weight_op(t.name).lower()} touches {fmt_bytes(biggest)}, over "
                    f"the {fmt_bytes(target.max_tensor_bytes)} the driver allows one tensor, so llama.cpp keeps it "
                    "in host memory"
                )
        return None

    def nearest_drop(self, items: Sequence[str], lane: str) -> tuple[list[str], str] | None:
        """When moving ``items`` to ``lane`` is refused: the largest part of them that can move, and in words
        what it is ("only the experts (12 blocks)"); None when no part can."""
        idx = self.model.index

        def role(i: str) -> Role:
            return idx.block_of_item(i).role

        tries = (
            ("only the experts", lambda i: role(i) is Role.EXPERTS),
            ("only the FFN and experts", lambda i: role(i) in (Role.EXPERTS, Role.FFN)),
            ("everything but the attention", lambda i: role(i) is not Role.ATTN),
        )
        seen: set[tuple[str, ...]] = set()
        for words, keep in tries:
            sub = [i for i in items if keep(i) and self.placement.device_of(i) != lane]
            if not sub or len(sub) == len(items) or tuple(sub) in seen:
                continue
            seen.add(tuple(sub))
            if self.check_move(sub, lane)[0] is not None:
                return sub, f"{words} ({len(sub)} block{'s' if len(sub) > 1 else ''})"
        return None

    def warm_previews(self) -> bool:
        """Get ready for a drag from the current placement while the board is still
        (:meth:`app.memory.estimator.Estimator.warm`: a graph a preview would otherwise build first). True where
        there is more to do: call again. A placement that cannot be estimated is left to the gauges, which say
        why."""
        p = self.placement
        try:
            return self.estimator.warm(p.devices, p.settings, p.weight_placement())
        except (LayerdeckError, ValueError):
            return False

    def preview(self, items: Sequence[str], lane: str | None) -> Preview | None:
        """Estimate the drop of ``items`` on ``lane`` without making it; ``lane`` None ends the preview."""
        if lane is None:
            self.preview_state = None
            self._emit(Change.PREVIEW)
            return None
        trial, why = self.check_move(items, lane, verify=False)  # the drop checks (move)
        est = dec = None
        if trial is not None:
            try:
                # a drag preview: the cut graph (3-4x faster on long models, a few MiB off at worst); the drop
                # itself is estimated with every layer (_recompute)
                wp = trial.weight_placement()
                est = self.estimator.estimate(trial.devices, trial.settings, wp, quick=True)
                view = self.learned_view(trial, est)  # the drop's figures as the gauges show the current ones
                est = view.estimate if view is not None else est
                dec = self.speed_of(wp, trial.settings)[0]  # as the drop's gauges will have it (speed_for)
            except (LayerdeckError, ValueError) as exc:
                why = str(exc)
        self.preview_state = Preview(tuple(items), lane, est, dec, why)
        self._emit(Change.PREVIEW)
        return self.preview_state

    def move(self, items: Sequence[str], lane: str) -> bool:
        items = [i for i in items if self.placement.device_of(i) != lane]
        if not items:
            return False
        trial, why = self.check_move(items, lane)
        if trial is None:
            self.say(why or "llama.cpp cannot express this placement")
            return False
        self.history.push(move_command(self.placement, items, lane))
        self.say(self.history.undo_label or "")
        return True

    # ------------------------------------------------------------------ other edits

    def replace(self, new: Placement, label: str, *, keep_settings: bool = True) -> bool:
        """Make ``new`` the placement, as one edit. Returns False (and adds no step) when nothing changes."""
        new = new.copy()
        if keep_settings:
            new.settings = self.placement.settings.copy()
        if new.snapshot() == self.placement.snapshot():
            self.say(f"{label}: no change")
            return False
        self.history.push(edit_to(self.placement, new, label))
        self.say(label)
        return True

    def apply_preset(self, which: str, n: int = 0) -> bool:
        """``all`` (every layer on the GPUs), ``experts`` (experts to the CPU) or ``ncmoe`` (``--n-cpu-moe n``)."""
        from .placement import presets

        s = self.placement.settings
        if which == "all":
            new, label = presets.all_on_gpus(self.model, self.devices, s), "All on GPU"
        elif which == "experts":
            new, label = presets.experts_to_cpu(self.model, self.devices, s), "Experts to CPU"
        elif which == "ncmoe":
            new, label = presets.n_cpu_moe(self.model, self.devices, s, n), f"--n-cpu-moe {n}"
        else:
            raise ValueError(f"unknown preset {which!r} (all, experts, ncmoe)")
        return self.replace(new, label)

    def auto_fit(self, host_budget: int | None = None):
        """Fill every device up to its margin (raises FitError when nothing fits); one edit. ``host_budget``
        also limits host RAM (by default it is not a hard limit: CPU weights are memory-mapped)."""
        from .placement.autofit import auto_fit

        res = auto_fit(
            self.model,
            self.devices,
            self.placement.settings,
            margin=self.margin,
            host_budget=host_budget,
            pinned_from=self.placement,
            estimator=self.estimator,
        )
        self.replace(res.placement, "Auto-fit")
        return res

    def start_fitted(self) -> str | None:
        """Before the first edit: when the starting layout (everything on the devices) does not fit, start from
        the layout llama.cpp's own fit would run (``--fit``, on by default: experts, then layers, leave the
        devices until everything fits their free memory less the margin). Returns what was done, for the user;
        None when it already fits, nothing was edited yet or nothing fits."""
        from .placement.autofit import FitError, auto_fit

        if self.history.undo_stack or self.history.redo_stack or not self.devices:
            return None
        over = [o for o in self.overflows() if o.lane != CPU]
        if not over:
            return None
        try:
            res = auto_fit(
                self.model, self.devices, self.placement.settings, margin=self.margin, estimator=self.estimator
            )
        except FitError as exc:
            return f"{self.model.path.name} does not fit these devices even with everything movable in RAM: {exc}"
        excess = ", ".join(f"{o.lane} by {_gib(o.excess)}" for o in over)
        self.placement.restore(res.placement.snapshot())
        self._on_history()
        return (
            f"With every layer on the GPUs the model would not fit ({excess} over), so it opened fitted the way "
            "llama.cpp runs it (--fit, on by default: experts, then layers, move to RAM until the rest fits). "
            "'All on GPU' puts everything back on the GPUs."
        )

    def fastest(self):
        """The fastest placement that fits (raises FitError when nothing fits); one edit."""
        from .placement.fastest import fastest

        res = fastest(
            self.model,
            self.devices,
            self.placement.settings,
            self.speed_params,
            margin=self.margin,
            pinned_from=self.placement,
            estimator=self.estimator,
            facts=self.speed_facts,
            export_cache=self.export_cache,
        )
        self.replace(res.placement, "Fastest")
        return res

    def set_pinned(self, items: Sequence[str], pinned: bool) -> None:
        items = [i for i in items if (i in self.placement.pinned) != pinned]
        if items:
            self.history.push(pin_command(self.placement, list(items), pinned))

    def set_settings(self, *, merge: bool = True, **changes) -> bool:
        """Change llama.cpp settings (context, slots, cache types...) as an edit; repeated edits of the same
        settings merge into one undo step (a slider's drag), unless ``merge`` is False (a file chosen: each choice
        is a step of its own). Returns False when nothing changes."""
        new_settings = self.placement.settings.copy(**changes)
        if new_settings == self.placement.settings:
            return False
        check_settings(new_settings)  # the one check every front end applies (raises ArgsError, nothing changes)
        trial = self.placement.copy()
        trial.settings = new_settings
        keys = sorted(k for k in changes if getattr(new_settings, k) != getattr(self.placement.settings, k))
        label = "Set " + ", ".join(
            f"{_SETTING_LABELS.get(k, k)} {_setting_value(k, getattr(new_settings, k))}" for k in keys
        )
        key = "settings:" + ",".join(keys) if merge else None
        self.history.push(edit_to(self.placement, trial, label, merge_key=key))
        return True

    @property
    def draft_model(self) -> Model | None:
        """The draft model (``-md``) the settings name, when it is open: the estimate adds its blocks and
        buffers; None without one."""
        d = self.estimator.draft_for(self.placement.settings)
        return d.model if d is not None else None

    def set_draft(self, draft: Model | None) -> bool:
        """Use ``draft`` as the draft model for speculative decoding (``-md`` with the ``--spec-type`` its kind
        drafts with: draft-simple, an EAGLE-3 head's draft-eagle3, Gemma 4's assistant's draft-mtp), or none; one
        undoable edit of the settings (the file, its figures follow). The draft's own flags (``-ngld``, ``-devd``,
        ``-ctkd``...) stay as set."""
        before = self.draft_model
        if draft is not None:  # without one the open draft stays in memory: undo brings it back
            self.estimator.use_draft(draft)
        path = os.fspath(draft.source or draft.path) if draft is not None else None
        # -md alone loads the draft but does not draft with it: the draft type comes and goes with the file (the
        # MTP checkbox's draft-mtp stays unless the file being replaced was what it drafted with)
        gone = {"draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark"}
        if before is not None and spec_type_for(before.params.arch) == "draft-mtp":
            gone.add("draft-mtp")
        types = [t for t in self.placement.settings.spec_types if t not in gone]
        if draft is not None and spec_type_of(draft) not in types:
            types.append(spec_type_of(draft))
        if not self.set_settings(draft_model=path, spec_types=types, merge=False):
            self._recompute()
            self._emit(Change.edit())
        return True

    @property
    def projector(self) -> Projector | None:
        """The projector (``--mmproj``) the settings name, when its file is open; None without one."""
        return self.estimator.projector_for(self.placement.settings)

    def set_projector(self, proj: Projector | None) -> bool:
        """Use ``proj`` as the multimodal projector (``--mmproj``), or none; one undoable edit of the settings
        (where it runs, ``--no-mmproj-offload``/``-mmdev``, stays as set)."""
        if proj is not None:  # without one the open file stays in memory: undo brings it back
            self.estimator.use_projector(proj)
        if not self.set_settings(mmproj=os.fspath(proj.path) if proj is not None else None, merge=False):
            self._recompute()
            self._emit(Change.edit())
        return True

    def _open_attached(self, settings: LlamaSettings) -> tuple[Estimator | None, Projector | None, list[str]]:
        """The draft model (-md) and projector (--mmproj) ``settings`` name: the open ones when they are those
        files, else read now (safe off the GUI thread: nothing is changed); what could not be read, as sentences."""
        problems: list[str] = []
        drafter = self.estimator.draft_for(settings)
        if settings.draft_model and drafter is None:
            try:
                drafter = Estimator(open_model(settings.draft_model))
            except (LayerdeckError, OSError, ValueError) as exc:
                problems.append(
                    f"the draft model {settings.draft_model} (-md) could not be opened, so it is not counted: {exc}"
                )
        proj = self.estimator.projector_for(settings)
        if settings.mmproj and proj is None:
            try:
                proj = open_projector(settings.mmproj)
            except (LayerdeckError, OSError, ValueError) as exc:
                problems.append(
                    f"the projector {settings.mmproj} (--mmproj) could not be opened, so it is not counted: {exc}"
                )
        return drafter, proj, problems

    def _adopt(self, drafter: Estimator | None, proj: Projector | None) -> bool:
        """Make them the open draft and projector (None keeps the open one: undo can bring it back); whether
        either changed."""
        changed = False
        if drafter is not None and drafter is not self.estimator.draft:
            self.estimator.use_draft(drafter)
            changed = True
        if proj is not None and proj is not self.estimator.projector:
            self.estimator.use_projector(proj)
            changed = True
        return changed

    def set_devices(self, devices: Sequence[Lane], host_capacity: int | None = None) -> None:
        """A new lane list (detection finished, the user edited it). A placement that only uses lanes still
        present is kept, with the new capacities; otherwise it is laid out again on the new lanes. Before the
        first edit this is the starting point (no undo step); after it, one undoable edit."""
        from .placement.presets import all_on_gpus

        devices = list(devices)
        if host_capacity is not None:
            self.host_capacity = host_capacity
        self._speed_params = None
        used = (set(self.placement.layer_device) | set(self.placement.tensor_device)) - {CPU, ""}
        if used <= {d.name for d in devices}:
            new = self.placement.copy()
            new.devices = devices
            label = "Devices changed"
        else:
            new = all_on_gpus(self.model, devices, self.placement.settings)
            new.pinned = set()
            label = "Lay out on the new devices"
        if not self.history.undo_stack and not self.history.redo_stack:
            self.placement.restore(new.snapshot())  # nothing edited yet: a new starting point
            self._on_history()
            return
        if new.snapshot() == self.placement.snapshot():
            self._recompute()
            self._emit(Change.DEVICES | Change.ESTIMATE)
            return
        self.history.push(edit_to(self.placement, new, label))

    def import_command(self, text: str, shell: str | None = None) -> list[str]:
        """Take the placement and memory settings of a pasted llama.cpp command, as one edit.

        Returns the parser's warnings (unknown flags...); raises a LayerdeckError (or ValueError) naming the
        problem when the text cannot be read. :meth:`import_command_full` also says what was kept.
        """
        return list(self.import_command_full(text, shell).warnings)

    def import_command_full(self, text: str, shell: str | None = None) -> ImportResult:
        """:meth:`import_command`, returning every warning, the flags kept as the launch profile (port, host,
        API key, and the flags Layerdeck does not place as extra arguments) and the model the command names."""
        return self.apply_import(self.prepare_import(text, shell))

    def _import_basis(self) -> tuple:
        return (id(self.model), tuple(self.devices))

    def prepare_import(self, text: str, shell: str | None = None) -> PreparedImport:
        """Read a pasted command and lay out its placement without changing the session (safe off the GUI
        thread: it reads the model and the lanes, and matches patterns with a matcher of its own)."""
        from .command.parse import parse_llama_args

        env, argv = parse_command_text(text, shell)
        parsed = parse_llama_args(argv, env=env)
        new = Placement.from_settings(self.model, list(self.devices), parsed.settings)
        profile, notes = split_launch_args(argv)
        warnings = [w for w in parsed.warnings if not w.startswith("unknown flag ")] + notes
        other = parsed.model is not None and parsed.model != "" and not self._same_file(parsed.model)
        if other:
            warnings.append(
                f"the command names another model ({parsed.model}); its settings were applied to the open one "
                f"({self.model.path.name})"
            )
        drafter, proj, problems = self._open_attached(parsed.settings)
        warnings += problems
        return PreparedImport(
            new, parsed.settings, profile, tuple(warnings), parsed.model, other, self._import_basis(), drafter, proj
        )

    def apply_import(self, prep: PreparedImport) -> ImportResult:
        """Make a prepared import one edit. Refused (ImportChanged) when the model or the lanes changed since it
        was prepared: the layout would be for another machine."""
        if prep.basis != self._import_basis():
            raise ImportChanged("the model or the devices changed while the command was read: paste it again")
        new = prep.placement
        new.settings = self.placement.settings.copy(**{k: getattr(prep.settings, k) for k in IMPORTED_SETTINGS})
        attached = self._adopt(prep.draft, prep.projector)
        profile = prep.profile
        changed = new.snapshot() != self.placement.snapshot()
        if changed:
            self.history.push(edit_to(self.placement, new, "Import command"))
        elif attached:
            self._recompute()
            self._emit(Change.ESTIMATE)
        if profile != self.launch_profile and (profile.extra or profile.port or profile.api_key or profile.lan):
            self.set_launch_profile(profile)
            changed = True
        self.say("Import command" if changed else "Import command: no change")
        return ImportResult(prep.warnings, tuple(profile.extra), prep.model, prep.other_model)

    def _same_file(self, path: str) -> bool:
        try:
            return os.path.samefile(path, self.model.path)
        except OSError:
            return os.path.basename(path) == self.model.path.name

    def restore_launch_profile(self, profile: LaunchProfile) -> None:
        """The model's last launch profile as the starting point (remembered, so not unsaved work)."""
        self.launch_profile = LaunchProfile(profile.port, profile.host, profile.api_key, list(profile.extra))
        self._emit(Change.SETTINGS, None)

    def set_launch_profile(self, profile: LaunchProfile) -> bool:
        """The launch profile (port, host, API key, extra arguments); unsaved work until the plan is saved."""
        if profile == self.launch_profile:
            return False
        self.launch_profile = LaunchProfile(profile.port, profile.host, profile.api_key, list(profile.extra))
        self._launch_dirty = True
        self._emit(Change.SETTINGS | Change.HISTORY, "Launch profile changed")
        return True

    def open_plan(self, path: str | os.PathLike, label: str | None = None) -> None:
        """Load a plan file made for this model (raises PlanError otherwise), as one edit."""
        data = read_plan(path)
        try:
            new = from_dict(data, self.model)
            profile = launch_from_dict(data)
        except PlanError as exc:
            err = type(exc)(f"{os.fspath(path)}: {exc}")
            err.where = exc.where
            raise err from None
        drafter, proj, problems = self._open_attached(new.settings)
        self._adopt(drafter, proj)
        for problem in problems:
            self.say(problem[0].upper() + problem[1:])
        self.history.push(edit_to(self.placement, new, label or f"Open plan {os.path.basename(os.fspath(path))}"))
        if profile is not None:
            self.set_launch_profile(profile)

    def save_plan(self, path: str | os.PathLike, *, as_document: bool = True) -> None:
        """Write the plan; ``as_document`` makes it the session's file and marks the session saved."""
        save_plan(self.placement, path, self.launch_profile)
        if as_document:
            self.plan_path = os.fspath(path)
            self.mark_saved()

    def undo(self) -> bool:
        return self.history.undo()

    def redo(self) -> bool:
        return self.history.redo()

    def mark_saved(self) -> None:
        self.history.mark_clean()
        self._launch_dirty = False

    def _on_history(self) -> None:
        state = self.placement.snapshot()
        before, self._state = self._state, state
        changes = Change.HISTORY | Change.ESTIMATE
        if not state.same_assignment(before) or state.pinned != before.pinned:
            changes |= Change.PLACEMENT
        if state.settings != before.settings:
            changes |= Change.SETTINGS
        if state.devices != before.devices:
            changes |= Change.DEVICES
        if changes & ~(Change.HISTORY | Change.ESTIMATE):
            self._recompute()
            if self.opinion is not None or self.opinion_error:
                self.opinion, self.opinion_error = None, None
                changes |= Change.OPINION
        else:
            changes &= ~Change.ESTIMATE  # only undo labels or the saved state changed
        self._emit(changes)

    # ------------------------------------------------------------------ llama.cpp's second opinion

    def verifiable(self) -> tuple[Placement, list[str], list[str]]:
        """What llama.cpp's dry run can check on this machine: (placement, lanes it checks, planned lanes);
        raises InexpressibleError (saying why) when the planned cards hold layers that cannot move to the CPU.

        llama.cpp refuses a device it does not have ("invalid device: CUDA0"), so a planned card's blocks are
        counted on the CPU for the dry run: the detected devices' figures are then llama.cpp's own, the CPU's
        are not comparable (it also holds the planned cards' blocks) and are left out of the checked lanes."""
        planned = [d.name for d in self.devices if d.kind == "planned"]
        if not planned:
            return self.placement.copy(), list(self.lanes), []
        trial = self.placement.copy()
        trial.devices = [d for d in trial.devices if d.name not in planned]
        trial.layer_device = [CPU if x in planned else x for x in trial.layer_device]
        trial.tensor_device = [CPU if x in planned else x for x in trial.tensor_device]
        trial.pinned = set()
        try:
            placement_args(trial)
        except InexpressibleError as exc:
            raise InexpressibleError(
                f"{', '.join(planned)} {'is a planned card' if len(planned) == 1 else 'are planned cards'}, which "
                f"llama.cpp cannot see, and with {'its' if len(planned) == 1 else 'their'} layers counted on the "
                f"CPU the placement cannot be run here ({exc}). Verify on the machine that has the cards."
            ) from None
        return trial, [d.name for d in trial.devices], planned

    def set_opinion(self, opinion, error: str | None = None) -> None:
        self.opinion, self.opinion_error = opinion, error
        self._emit(Change.OPINION)

    # ------------------------------------------------------------------ learning from the user's llama.cpp

    def use_learned(self, store: LearnedStore | None, build: str | None) -> None:
        """Correct the estimate with the figures ``store`` learned from the llama.cpp build ``build``."""
        self.learned, self.learned_build = store, build
        self._recompute()
        self._emit(Change.ESTIMATE | Change.OPINION)

    def _apply_learned(self, est: Estimate) -> Estimate:
        self.verification = self.learned_view(self.placement, est)
        return self.verification.estimate if self.verification is not None else est

    def learned_view(self, p: Placement, est: Estimate) -> Verification | None:
        """``est`` (the estimate of ``p``) with the learned figures that apply to it; None when nothing is learned
        from this llama.cpp build or there is nothing to learn (the demo)."""
        from .memory import learned

        if self.learned is None or self.learned_build is None or self.model.is_demo:
            return None
        if self._model_id is None:
            self._model_id = learned.model_id(self.model)
        machine = learned.Machine(self.learned_build, self._model_id, learned.devices_id(p.devices))
        if not self.learned.has_machine(machine):
            return learned.Verification(est, {}, {})
        keys = learned.figure_keys(self.estimator, p.devices, p.settings, est.placement, est)
        view = learned.apply(self.learned, machine, keys, est)
        if p.settings.tool != "fit-params":
            view.note = learned.SERVER_COMPUTE_NOTE
        return view

    def dry_run_job(self, llama_dir=None, timeout: float = 120.0, env: dict[str, str] | None = None) -> DryRunJob:
        """The dry run for what this machine can check (:meth:`verifiable`); raises with the reason when it
        cannot be made (demo or header-only model, planned cards only); a missing llama.cpp is said by the job's
        run (``job.run.run()``, which finds the tool off the GUI thread)."""
        from .llamacpp.fit_print import FitPrintError
        from .placement.dry_run import prepare

        if self.model.is_demo:
            raise FitPrintError("the demo model has no file for llama.cpp to read: open a real GGUF to verify.")
        if self.model.source:
            raise FitPrintError(
                f"only the header of {self.model.source} was read: llama.cpp's dry run needs the file; download "
                "it and open it to verify."
            )
        trial, checked, planned = self.verifiable()
        if planned and not trial.devices:
            raise FitPrintError(
                f"nothing can be checked here: {', '.join(planned)} {'is a planned card' if len(planned) == 1 else 'are planned cards'} "
                "(llama.cpp only sees devices this machine has) and the CPU's share depends on them"
            )
        return prepare(
            trial,
            checked,
            planned,
            self.model.path,
            rpc=self.rpc_endpoints(),
            llama_dir=llama_dir,
            timeout=timeout,
            env=env,
        )

    def learn_dry_run(self, job: DryRunJob, rows: list[FitRow]) -> None:
        """Keep what llama.cpp decided in ``job`` (its ``rows``), show them as the opinion, and correct the
        estimate with them (for this placement and every later one they transfer to)."""
        from .memory import learned
        from .placement.dry_run import learned_from, opinion_of

        if self.learned is None:
            self.learned = learned.LearnedStore(None)
        if self._model_id is None:
            self._model_id = learned.model_id(self.model)
        _machine, self.last_correction = learned_from(job, rows, self.estimator, self.learned, self._model_id)
        self.learned_build = job.run.build
        self.opinion, self.opinion_error = opinion_of(job, rows), None
        self._recompute()
        self._emit(Change.ESTIMATE | Change.OPINION)

    # ------------------------------------------------------------------ commands

    def placement_args(self) -> PlacementArgs:
        return placement_args(self.placement, self.export_cache)

    def command(
        self, *, rpc: Sequence[str] | None = None, model_path: str | os.PathLike | None = None, caps=None, **options
    ) -> Command:
        """The llama.cpp command for the current placement (raises InexpressibleError with the reason).

        ``rpc`` defaults to every RPC host of the lanes; ``options`` go to
        :func:`app.placement.command.build_command` (``tool``, ``program``, ``host``, ``port``, ``extra``,
        ``cuda_order``)."""
        path = model_path or self.model.source or os.fspath(self.model.path)  # source: read over HTTP
        # the launch profile's port, host, API key and extra arguments come after the placement
        options["extra"] = self.launch_profile.argv() + list(options.get("extra") or [])
        if caps is not None:
            options["caps"] = caps
        return build_command(
            self.placement,
            path,
            rpc=list(rpc) if rpc is not None else self.rpc_endpoints(),
            cache=self.export_cache,
            **options,
        )

    def export(self, fmt: str = "bash", **kw) -> str:
        """The command in one of :data:`app.command.formats.FORMATS` (bash, powershell, cmd, yaml, env, ollama)."""
        cmd = self.command(**kw)
        return render(cmd.argv, fmt, env=cmd.env or None, name=self.model.path.stem, n_layers=self.model.params.n_layer)

    # ------------------------------------------------------------------ speed proof

    def proof_candidates(self) -> list[tuple[str, Placement]]:
        """The placements a benchmark run compares: this one, auto-fit, fastest and an --n-cpu-moe sweep."""
        from .placement.autofit import FitError, auto_fit
        from .placement.fastest import fastest
        from .placement.presets import n_cpu_moe

        s = self.placement.settings
        out = [("current", self.placement.copy())]
        try:
            out.append(
                ("auto-fit", auto_fit(self.model, self.devices, s, margin=0, estimator=self.estimator).placement)
            )
            out.append(
                (
                    "fastest",
                    fastest(
                        self.model,
                        self.devices,
                        s,
                        self.speed_params,
                        margin=0,
                        estimator=self.estimator,
                        facts=self.speed_facts,
                        export_cache=self.export_cache,
                    ).placement,
                )
            )
        except FitError:
            pass
        n_moe = sum(1 for b in self.model.blocks if b.role is Role.EXPERTS and not b.nextn)
        if self.devices and n_moe:
            for n in sorted({0, n_moe // 2, n_moe}):
                out.append((f"--n-cpu-moe {n}", n_cpu_moe(self.model, self.devices, s, n)))
        return out
