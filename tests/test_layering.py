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
        # var/ holds run-time files, and make bench-peer's CrewAI venv (which imports litellm)
        and p.relative_to(ROOT).parts[0] != "var"
        and any(m.split(".")[0] == "litellm" for m in imported_modules(p))
    ]
    assert importers == ["agents/engine/gateway.py"]


def test_the_layering_check_catches_a_django_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from django.db import models\nimport crews.models\nfrom agents.engine import llm\n")
    assert [m for m in imported_modules(bad) if offending(m)] == ["django.db", "crews.models"]


# The apps: layers point one way ----------------------------------------------------------------

APP_PACKAGES = ("agents", "crews", "knowledge", "planner_site")


def app_modules() -> dict[str, Path]:
    """Every module of the apps outside their engines and migrations, by dotted name."""
    found: dict[str, Path] = {}
    for package in APP_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "engine" in parts or "migrations" in parts:
                continue
            name = ".".join(parts).removesuffix(".__init__")
            found[name] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Who imports whom among the app modules, counting imports inside functions too: a
    deferred import is still a dependency, only one that hides a circle."""
    modules = app_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    deps.add(target if target in modules else node.module)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_circle_among_the_apps_modules() -> None:
    assert circles(import_graph()) == []


def test_the_circle_check_finds_a_deferred_import_circle() -> None:
    graph = {"crews.runs": {"crews.tasks"}, "crews.tasks": {"crews.runner"}, "crews.runner": {"crews.runs"},
             "crews.models": set()}
    assert circles(graph) == [["crews.runner", "crews.runs", "crews.tasks"]]


def test_the_agents_app_imports_nothing_of_crews() -> None:
    graph = import_graph()
    reaching = {name: sorted(d for d in deps if d.startswith("crews")) for name, deps in graph.items()
                if name.startswith("agents")}
    assert {name: deps for name, deps in reaching.items() if deps} == {}


def test_services_never_import_the_worker() -> None:
    graph = import_graph()
    worker = {"crews.runner", "crews.tasks", "crews.people"}
    services = [n for n in graph if n.split(".")[-1] in ("services", "selectors", "runs", "plans", "bridge")]
    assert services and {n: sorted(graph[n] & worker) for n in services if graph[n] & worker} == {}


def test_importing_the_engines_loads_no_django() -> None:
    import subprocess
    import sys

    code = ("import sys, agents.engine.agent, agents.engine.planning, agents.engine.plan_execute, "
            "crews.engine.kickoff, crews.engine.planner; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'channels', 'ninja')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
