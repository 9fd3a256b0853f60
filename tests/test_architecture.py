"""The core stays GUI-free: checked by import-linter's contract in pyproject.toml, and by a plain AST scan."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("PySide6", "pyqtgraph", "shiboken6", "ui")


def test_import_linter_contract_holds():
    code = ("import sys; from importlinter.cli import lint_imports_command; "
            "sys.argv = ['lint-imports', '--config', 'pyproject.toml']; lint_imports_command()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "KEPT" in proc.stdout


def test_no_gui_import_anywhere_in_app_including_lazy_ones():
    """import-linter sees module-level and function-level imports; this also catches importlib strings."""
    offenders = []
    for path in (ROOT / "app").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                names = [str(node.args[0].value)]
            for n in names:
                if n.split(".")[0] in FORBIDDEN:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {n}")
    assert not offenders, offenders


def test_every_core_package_is_in_a_layer():
    """A package outside the layers contract could import anything (and bring cycles back)."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layered = next(c for c in conf["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    names = {n.strip() for layer in layered["layers"] for n in layer.replace(":", "|").split("|")}
    present = {p.name for p in (ROOT / "app").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    present |= {p.stem for p in (ROOT / "app").glob("*.py") if p.stem not in ("__init__", "__main__", "_version")}
    assert present <= names, f"not in a layer: {sorted(present - names)}"
    missing_init = [p.name for p in (ROOT / "app").iterdir()
                    if p.is_dir() and p.name != "__pycache__" and not (p / "__init__.py").is_file()
                    and any(p.glob("*.py"))]
    assert not missing_init, f"namespace packages escape import-linter: {missing_init}"
