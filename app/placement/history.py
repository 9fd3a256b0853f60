"""Edits as commands with do/undo and a label, on a GUI-free, bounded history.

Every change a user makes to a session is one entry: a drop of ten blocks, a
preset, a pin, a context size, a device list, an imported command, an opened
plan. Entries store the whole placement state before and after
(:class:`~app.placement.placement.PlacementState`, Orange canvas style)
rather than inverses, so undo is exact and an undo never mixes the device
list or settings of one moment with the assignment of another. Consecutive
edits of the same setting (a spin box stepped ten times) merge into one
entry, the way QUndoCommand.mergeWith does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from .placement import Placement, PlacementState

log = logging.getLogger(__name__)


@dataclass
class Edit:
    """Any edit, recorded as the placement state before and after it."""

    label: str
    before: PlacementState
    after: PlacementState
    merge_key: str | None = None  # edits with the same key merge when pushed one after another

    def do(self, placement: Placement) -> None:
        placement.restore(self.after)

    def undo(self, placement: Placement) -> None:
        placement.restore(self.before)


def edit_to(placement: Placement, new: Placement, label: str, merge_key: str | None = None) -> Edit:
    """An edit replacing ``placement``'s whole state by ``new``'s (nothing changes until it is pushed)."""
    return Edit(label, placement.snapshot(), new.snapshot(), merge_key)


def move_command(placement: Placement, items: list[str], device: str, label: str | None = None) -> Edit:
    """An edit moving blocks/parts ``items`` to ``device`` (computed on a copy)."""
    trial = placement.copy()
    for item in items:
        trial.assign(item, device)
    if label is None:
        label = f"Move {items[0]} to {device}" if len(items) == 1 else f"Move {len(items)} blocks to {device}"
    return edit_to(placement, trial, label)


def replace_command(placement: Placement, new: Placement, label: str) -> Edit:
    """An edit that replaces the whole assignment (presets, auto-fit, import, plan), pins included."""
    return edit_to(placement, new, label)


def pin_command(placement: Placement, items: list[str], pinned: bool) -> Edit:
    trial = placement.copy()
    trial.pinned = trial.pinned | set(items) if pinned else trial.pinned - set(items)
    label = ("Pin " if pinned else "Unpin ") + (items[0] if len(items) == 1 else f"{len(items)} blocks")
    return edit_to(placement, trial, label)


@dataclass
class History:
    """Undo/redo stack. Listeners are called with no arguments after every change."""

    placement: Placement
    limit: int = 200
    undo_stack: list[Edit] = field(default_factory=list)
    redo_stack: list[Edit] = field(default_factory=list)
    listeners: list[Callable[[], None]] = field(default_factory=list)
    clean_index: int | None = 0

    def push(self, cmd: Edit) -> None:
        cmd.do(self.placement)
        last = self.undo_stack[-1] if self.undo_stack else None
        if (
            cmd.merge_key is not None
            and last is not None
            and last.merge_key == cmd.merge_key
            and not self.redo_stack
            and self.clean_index != len(self.undo_stack)
        ):
            last.after, last.label = cmd.after, cmd.label
            if last.before == last.after:  # stepped back to where it started: no edit left
                self.undo_stack.pop()
        else:
            self.undo_stack.append(cmd)
            if len(self.undo_stack) > self.limit:
                del self.undo_stack[0]
                self.clean_index = None if self.clean_index in (None, 0) else self.clean_index - 1
        self.redo_stack.clear()
        self._changed()

    def undo(self) -> bool:
        if not self.undo_stack:
            return False
        cmd = self.undo_stack.pop()
        cmd.undo(self.placement)
        self.redo_stack.append(cmd)
        self._changed()
        return True

    def redo(self) -> bool:
        if not self.redo_stack:
            return False
        cmd = self.redo_stack.pop()
        cmd.do(self.placement)
        self.undo_stack.append(cmd)
        self._changed()
        return True

    @property
    def undo_label(self) -> str | None:
        return self.undo_stack[-1].label if self.undo_stack else None

    @property
    def redo_label(self) -> str | None:
        return self.redo_stack[-1].label if self.redo_stack else None

    @property
    def dirty(self) -> bool:
        return self.clean_index != len(self.undo_stack)

    def mark_clean(self) -> None:
        self.clean_index = len(self.undo_stack)
        self._changed()

    def _changed(self) -> None:
        for fn in list(self.listeners):
            fn()
