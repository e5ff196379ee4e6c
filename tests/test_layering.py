"""The engines stay plain Python: no Django, channels, ninja or app imports; litellm in one module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENGINES = [ROOT / "agents" / "engine", ROOT / "crews" / "engine"]
FORBIDDEN = ("django", "channels", "ninja", "planner_site", "daphne", "channels_redis")
APP_MODULES = ("agents", "crews")


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def offending(module: str) -> bool:
    top = module.split(".")[0]
    if top in FORBIDDEN:
        return True
    # Engines may import each other's engine package, never the Django side of an app.
    return top in APP_MODULES and not module.startswith((f"{top}.engine",)) and module != top


def engine_files() -> list[Path]:
    return sorted(p for engine in ENGINES for p in engine.rglob("*.py"))


def test_engine_packages_exist() -> None:
    assert all(engine.is_dir() for engine in ENGINES)
    assert len(engine_files()) >= 5


@pytest.mark.parametrize("path", engine_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_engine_module_imports_nothing_from_django_or_the_apps(path: Path) -> None:
    bad = [m for m in imported_modules(path) if offending(m)]
    assert bad == [], f"{path.relative_to(ROOT)} imports {bad}"


def test_only_the_gateway_imports_litellm() -> None:
    importers = [
        str(p.relative_to(ROOT))
        for p in ROOT.glob("**/*.py")
        if ".venv" not in p.parts and "tests" not in p.parts and "bench" not in p.parts
        and any(m.split(".")[0] == "litellm" for m in imported_modules(p))
    ]
    assert importers == ["agents/engine/gateway.py"]


def test_the_layering_check_catches_a_django_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from django.db import models\nimport crews.models\nfrom agents.engine import llm\n")
    assert [m for m in imported_modules(bad) if offending(m)] == ["django.db", "crews.models"]
