"""The open model and its placement, as one Qt object the widgets subscribe to.

Wraps the GUI-free :class:`app.placement.history.History` and re-estimates
memory after every change; widgets receive this object in their constructor
and listen to its signals (no globals).
"""

from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, Signal

from app.memory.estimator import Estimate, estimate
from app.memory.kv import SettingsError
from app.lanes import Lane
from app.memory.settings import LlamaSettings
from app.model import Model
from app.placement import CPU, Placement
from app.placement.export import InexpressibleError, placement_args
from app.placement.history import History, move_command, pin_command, replace_command

log = logging.getLogger(__name__)


class Document(QObject):
    changed = Signal()                 # placement, settings or devices changed; estimate is current
    preview_changed = Signal(object)   # Estimate of a hypothetical drop, or None when the preview ends
    message = Signal(str)              # a sentence for the status bar
    opinion_changed = Signal()         # llama.cpp's dry-run numbers arrived (or were cleared by an edit)

    def __init__(self, model: Model, devices: list[Lane], placement: Placement | None = None,
                 settings: LlamaSettings | None = None, host_capacity: int | None = None, parent=None):
        super().__init__(parent)
        self.model = model
        self._initial_devices = list(devices)
        self.host_capacity = host_capacity
        s = settings or LlamaSettings(n_ctx=min(model.params.n_ctx_train or 8192, 8192))
        if placement is None:
            from app.placement.presets import all_on_gpus

            placement = all_on_gpus(model, self._initial_devices, s)
        self.placement = placement
        self.history = History(self.placement)
        self.history.listeners.append(self._on_history)
        self.estimate: Estimate | None = None
        self.estimate_error: str | None = None
        self.last_estimate_ms = 0.0
        self.plan_path: str | None = None
        self.settings_dirty = False        # context/slot/cache changes are not undo steps but are unsaved work
        self.opinion = None                # app.placement.second_opinion.Opinion for the current placement
        self.opinion_error: str | None = None
        self.host_bandwidth: float | None = None  # measured by the main window, off the GUI thread
        self.speed_params = None
        self.decode = None                 # app.speed.model.DecodePrediction for the current placement
        self.prompt = None
        self.preview_decode = None
        self._reestimate()

    @property
    def devices(self) -> list[Lane]:
        """The lanes other than the CPU; part of the placement, so undo restores them too."""
        return self.placement.devices

    # ------------------------------------------------------------------ estimates

    def estimate_for(self, p: Placement) -> Estimate:
        return estimate(self.model, p.devices, p.settings, p.weight_placement())

    def _reestimate(self) -> None:
        t0 = time.perf_counter()
        try:
            self.estimate = self.estimate_for(self.placement)
            self.estimate_error = None
        except (SettingsError, ValueError) as exc:
            self.estimate, self.estimate_error = None, str(exc)
        self.decode, self.prompt = self.speed_for(self.placement)
        self.last_estimate_ms = (time.perf_counter() - t0) * 1000

    def _params(self):
        from app.speed.params import load_calibration, speed_params

        if self.speed_params is None:
            self.speed_params = speed_params(self.devices, self.host_bandwidth, load_calibration(self.devices))
        return self.speed_params

    def set_host_bandwidth(self, bw: float) -> None:
        self.host_bandwidth = bw
        self.speed_params = None
        self._reestimate()
        self.changed.emit()

    def speed_for(self, p: Placement):
        """(decode, prompt) predictions for ``p``, or (None, None) when the model cannot say."""
        from app.speed.model import predict_decode, predict_prompt

        try:
            wp = p.weight_placement()
            params = self._params()
            s = p.settings
            return predict_decode(self.model, wp, params), predict_prompt(self.model, wp, params, s.n_ubatch,
                                                                         s.op_offload)
        except (ValueError, ZeroDivisionError):
            return None, None

    def _on_history(self) -> None:
        self._reestimate()
        self._clear_opinion()
        self.changed.emit()

    def _clear_opinion(self) -> None:
        if self.opinion is not None or self.opinion_error:
            self.opinion, self.opinion_error = None, None
            self.opinion_changed.emit()

    def set_opinion(self, opinion, error: str | None = None) -> None:
        self.opinion, self.opinion_error = opinion, error
        self.opinion_changed.emit()

    def capacity(self, lane: str) -> int | None:
        if lane == CPU:
            return self.host_capacity
        d = next((d for d in self.devices if d.name == lane), None)
        return (d.free or d.total) if d else None

    # ------------------------------------------------------------------ edits

    def check_move(self, items: list[str], lane: str) -> tuple[Placement | None, str | None]:
        """The placement after moving ``items`` to ``lane``, or None and why llama.cpp cannot express it."""
        trial = self.placement.copy()
        try:
            for item in items:
                trial.assign(item, lane)
            placement_args(trial)
        except InexpressibleError as exc:
            return None, str(exc)
        except ValueError as exc:
            return None, str(exc)
        return trial, None

    def preview(self, items: list[str], lane: str | None) -> str | None:
        """Show the gauges as if ``items`` were dropped on ``lane`` (None ends the preview)."""
        if lane is None:
            self.preview_decode = None
            self.preview_changed.emit(None)
            return None
        trial, why = self.check_move(items, lane)
        if trial is None:
            self.preview_changed.emit(None)
            return why
        try:
            est = self.estimate_for(trial)
        except (SettingsError, ValueError) as exc:
            self.preview_decode = None
            self.preview_changed.emit(None)
            return str(exc)
        self.preview_decode = self.speed_for(trial)[0]
        self.preview_changed.emit(est)
        return None

    def move(self, items: list[str], lane: str) -> bool:
        items = [i for i in items if self.placement.device_of(i) != lane]
        if not items:
            return False
        trial, why = self.check_move(items, lane)
        if trial is None:
            self.message.emit(why or "llama.cpp cannot express this placement")
            return False
        self.history.push(move_command(self.placement, items, lane))
        self.message.emit(self.history.undo_label or "")
        return True

    def replace(self, new: Placement, label: str) -> None:
        new.settings = self.placement.settings.copy()
        self.history.push(replace_command(self.placement, new, label))
        self.message.emit(label)

    def set_pinned(self, items: list[str], pinned: bool) -> None:
        self.history.push(pin_command(self.placement, items, pinned))

    def set_settings(self, **changes) -> None:
        """Change memory settings (context, slots, cache types...). Not an undo step: the panel shows them."""
        new = self.placement.settings.copy(**changes)
        if new == self.placement.settings:
            return
        self.placement.settings = new
        self.settings_dirty = True
        self._reestimate()
        self._clear_opinion()
        self.changed.emit()

    @property
    def dirty(self) -> bool:
        return self.history.dirty or self.settings_dirty

    def mark_saved(self) -> None:
        self.settings_dirty = False
        self.history.mark_clean()

    def set_devices(self, devices: list[Lane], host_capacity: int | None = None) -> None:
        """New device list (detection finished, the user edited it). A placement that only uses devices
        still present is kept; otherwise it is laid out again on the new devices, as one undoable step."""
        from app.placement.presets import all_on_gpus

        old_used = (set(self.placement.layer_device) | set(self.placement.tensor_device)) - {CPU, ""}
        devices = list(devices)
        self.speed_params = None
        self.host_capacity = host_capacity if host_capacity is not None else self.host_capacity
        new = all_on_gpus(self.model, devices, self.placement.settings)
        if self.history.undo_label is None and self.history.redo_label is None:
            # nothing placed by hand yet: start over on the new devices, no undo step needed
            self.placement.restore(new.snapshot())
            self._reestimate()
            self._clear_opinion()
            self.changed.emit()
            return
        if old_used <= {d.name for d in devices}:
            self.placement.devices = devices
            self._reestimate()  # the user's placement still fits these devices: keep it
            self._clear_opinion()
            self.changed.emit()
            return
        self.history.push(replace_command(self.placement, new, "Lay out on the new devices"))

    def undo(self) -> None:
        self.history.undo()

    def redo(self) -> None:
        self.history.redo()
