"""The lock files install what pyproject.toml pins: a dependency changed in one place only would
install something else than the project says (``make lock`` regenerates them)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_PIN = re.compile(r"^([A-Za-z0-9_.\[\]-]+)==([^\s;]+)")


def pins(lines: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in lines:
        match = _PIN.match(line.strip())
        if match:
            name = re.sub(r"\[.*\]", "", match.group(1))
            found[re.sub(r"[-_.]+", "-", name).lower()] = match.group(2)
    return found


def locked(name: str) -> dict[str, str]:
    return pins((ROOT / "requirements" / name).read_text().splitlines())


def test_every_pin_of_pyproject_is_in_its_lock_file_at_the_same_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    serve, test = locked("serve.txt"), locked("test.txt")
    wanted = pins(project["dependencies"])
    assert {n: serve.get(n) for n in wanted} == wanted
    assert {n: test.get(n) for n in wanted} == wanted
    dev = pins(project["optional-dependencies"]["dev"])
    assert {n: test.get(n) for n in dev} == dev
    assert not set(dev) & set(serve), "the test tools are not installed to serve"


def test_the_lock_files_carry_hashes() -> None:
    for name in ("serve.txt", "test.txt"):
        text = (ROOT / "requirements" / name).read_text()
        assert text.count("==") <= text.count("--hash=sha256:")


def test_make_run_and_make_test_do_what_the_readme_says() -> None:
    import subprocess

    def dry(target: str) -> str:
        done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True)
        return done.stdout

    run, test = dry("run"), dry("test")
    # One process: serve migrates and seeds itself when needed (tests/planner_site/test_serve.py).
    assert "manage.py serve" in run and "manage.py migrate" not in run
    assert "requirements/test.txt" not in run  # serving installs no test tools
    assert "ruff check" in test and "pytest" in test and "tests/e2e" in test
