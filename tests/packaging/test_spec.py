"""Quick checks of packaging/layerdeck.spec (no build)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_spec_keeps_every_qt_module_the_code_imports():
    """The spec's excluded Qt modules must not include one that app/ or ui/ import."""
    tree = ast.parse((ROOT / "packaging" / "layerdeck.spec").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "QT_EXCLUDES")
    excluded = set(eval(compile(ast.Expression(node.value), "spec", "eval"), {}))  # string literals only
    # pyqtgraph (a dependency) imports these when it is used
    used = {"PySide6.QtCore", "PySide6.QtGui", "PySide6.QtWidgets", "PySide6.QtOpenGL", "PySide6.QtOpenGLWidgets",
            "PySide6.QtSvg", "PySide6.QtTest"}
    for py in [*ROOT.glob("app/**/*.py"), *ROOT.glob("ui/**/*.py")]:
        text = py.read_text(encoding="utf-8")
        used |= set(re.findall(r"\b(PySide6\.Qt\w+)", text))
        for names in re.findall(r"from\s+PySide6\s+import\s+\(?([\w\s,]+)", text):
            used |= {f"PySide6.{n.strip()}" for n in names.split(",") if n.strip().startswith("Qt")}
    assert not (used & excluded), f"the spec excludes Qt modules the code uses: {sorted(used & excluded)}"
