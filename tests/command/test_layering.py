"""app.command sits below placement: it imports none of placement, speed, launch, session, cli (nor the GUI)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("app.placement", "app.speed", "app.launch", "app.session", "app.cli", "ui", "PySide6")


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                out.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
            else:
                out.append((node.lineno, node.module or ""))
    return out


def _offenders(folder: Path, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in folder.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        package = ".".join(rel.parts[:-1])  # a module's package; an __init__'s is its own folder
        for line, name in _imports(path, package):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{rel}:{line} imports {name}")
    return bad


def test_command_package_imports_nothing_above_it():
    assert _offenders(ROOT / "app" / "command", FORBIDDEN) == []


def test_capabilities_does_not_import_the_command_package():
    assert _offenders(ROOT / "app" / "llamacpp", ("app.command",)) == []


def test_importing_the_builder_loads_no_placement():
    code = ("import sys, app.command.build, app.command.formats, app.command.parse, app.command.argv; "
            f"print([m for m in sys.modules if m.startswith({FORBIDDEN!r})])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
