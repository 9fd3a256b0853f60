"""Edits as commands with do/undo and a label, on a GUI-free, bounded history.

One gesture is one command: a drop of ten blocks is one :class:`MoveCommand`.
Commands store the state before and after (Orange canvas style), not
inverses, so undo is exact.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from .placement import Placement

log = logging.getLogger(__name__)


class Command:
    label = ""

    def do(self, placement: Placement) -> None:
        raise NotImplementedError

    def undo(self, placement: Placement) -> None:
        raise NotImplementedError


@dataclass
class SnapshotCommand(Command):
    """Any edit, recorded as the placement state before and after it."""

    label: str
    before: tuple = ()
    after: tuple = ()
    pinned_before: frozenset = frozenset()
    pinned_after: frozenset = frozenset()

    def do(self, placement: Placement) -> None:
        placement.restore(self.after)
        placement.pinned = set(self.pinned_after)

    def undo(self, placement: Placement) -> None:
        placement.restore(self.before)
        placement.pinned = set(self.pinned_before)


def move_command(placement: Placement, items: list[str], device: str, label: str | None = None) -> SnapshotCommand:
    """A command moving blocks/parts ``items`` to ``device`` (computed on a copy; nothing changes yet)."""
    trial = placement.copy()
    for item in items:
        trial.assign(item, device)
    if label is None:
        label = f"Move {items[0]} to {device}" if len(items) == 1 else f"Move {len(items)} blocks to {device}"
    return SnapshotCommand(label, placement.snapshot(), trial.snapshot(), frozenset(placement.pinned),
                           frozenset(placement.pinned))


def replace_command(placement: Placement, new: Placement, label: str) -> SnapshotCommand:
    """A command that replaces the whole assignment (presets, auto-fit, import)."""
    return SnapshotCommand(label, placement.snapshot(), new.snapshot(), frozenset(placement.pinned),
                           frozenset(new.pinned))


def pin_command(placement: Placement, items: list[str], pinned: bool) -> SnapshotCommand:
    after = set(placement.pinned)
    after = after | set(items) if pinned else after - set(items)
    label = ("Pin " if pinned else "Unpin ") + (items[0] if len(items) == 1 else f"{len(items)} blocks")
    return SnapshotCommand(label, placement.snapshot(), placement.snapshot(), frozenset(placement.pinned),
                           frozenset(after))


@dataclass
class History:
    """Undo/redo stack. Listeners are called with no arguments after every change."""

    placement: Placement
    limit: int = 200
    undo_stack: list[Command] = field(default_factory=list)
    redo_stack: list[Command] = field(default_factory=list)
    listeners: list[Callable[[], None]] = field(default_factory=list)
    clean_index: int | None = 0

    def push(self, cmd: Command) -> None:
        cmd.do(self.placement)
        self.undo_stack.append(cmd)
        self.redo_stack.clear()
        if len(self.undo_stack) > self.limit:
            del self.undo_stack[0]
            self.clean_index = None if self.clean_index in (None, 0) else self.clean_index - 1
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
