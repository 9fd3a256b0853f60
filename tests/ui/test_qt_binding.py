"""Guard against the PySide6 6.12.0 refcount bug that crashes the board on Python < 3.12."""

import sys

import pytest

pytestmark = pytest.mark.gui


def test_painting_does_not_leak_references_to_none(qapp):
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QColor, QImage, QPainter

    img = QImage(64, 64, QImage.Format.Format_ARGB32)
    painter = QPainter(img)
    before = sys.getrefcount(None)
    for _ in range(500):
        painter.fillRect(QRectF(0, 0, 8, 8), QColor("red"))
        painter.drawRect(QRectF(0, 0, 8, 8))
    after = sys.getrefcount(None)
    painter.end()
    if sys.version_info < (3, 12):  # None is immortal from 3.12 on, and its count is fixed
        assert after >= before - 10, f"PySide6 drops references to None ({before} -> {after}): pin PySide6 < 6.12"
