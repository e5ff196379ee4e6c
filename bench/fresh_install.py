"""A fresh install to its first page, and a second ``make run`` to its first page (issue #15).

Run from the repository root: ``.venv/bin/python bench/fresh_install.py`` (``--keep`` leaves the
copy for a look). What it does, as a new user would on a machine with Python and nothing else:

1. copies the tree as it stands (the files git tracks, and those it does not ignore, with their
   uncommitted changes) into a throwaway folder, so neither this checkout's ``.venv`` nor its
   ``var/`` is reused;
2. runs ``make run`` there with empty download caches (``UV_CACHE_DIR`` a new empty folder,
   ``PIP_NO_CACHE_DIR=1``): every package comes from the index, as on a fresh machine;
3. times from the command's start until ``GET /login/`` answers 200 (the first page), and
   separately the install (until the "Installing" lines end) from ``make``'s own output;
4. stops it (SIGTERM), runs ``make run`` again (the venv exists now) and times the first page.

Nothing but the package index and loopback is reached. The goal: a fresh install's first page
under 90 s on a 2-core machine at low load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from _common import ROOT, free_port

TIMEOUT = 600.0
GOAL_SECONDS = 90.0


def first_page(port: int, deadline: float, process: subprocess.Popen[str]) -> float | None:
    url = f"http://127.0.0.1:{port}/login/"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return None
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback only
                if response.status == 200:
                    return time.monotonic()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    return None


def make_run(tree: Path, env: dict[str, str], port: int, log: list[str]) -> tuple[float | None, float | None]:
    """``make run`` in ``tree``; seconds to the first page and to the end of the install."""
    started = time.monotonic()
    installed: list[float] = []
    process = subprocess.Popen(
        ["make", "run", f"PORT={port}"], cwd=tree, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            log.append(line.rstrip())
            if "manage.py serve" in line and not installed:
                installed.append(time.monotonic())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    page = first_page(port, started + TIMEOUT, process)
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
    except ProcessLookupError:  # make ended on its own (a failure: its output says why)
        process.wait()
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    reader.join(5)
    install = installed[0] - started if installed else None
    return (page - started if page else None), install


def main(keep: bool) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="planner-fresh-"))
    tree, cache = tmp / "crew-planner", tmp / "uv-cache"
    tree.mkdir()
    cache.mkdir()
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    present = b"\0".join(name for name in listed if name and (ROOT / name.decode()).is_file())
    archive = subprocess.run(["tar", "-c", "--null", "-T", "-"], cwd=ROOT, input=present,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_", "VIRTUAL_ENV", "UV_"))}
    env.update(UV_CACHE_DIR=str(cache), PIP_NO_CACHE_DIR="1", PLANNER_VAR_DIR=str(tmp / "var"))
    log: list[str] = []
    load = os.getloadavg()[0]
    try:
        fresh, install = make_run(tree, env, free_port(), log)
        warm, _ = make_run(tree, env, free_port(), log)
    finally:
        size = sum(f.stat().st_size for f in (tree / ".venv").rglob("*") if f.is_file()) / 2**20 \
            if (tree / ".venv").exists() else 0.0
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"Fresh install to first page — {os.cpu_count()} CPUs, load average {load:.2f} at the start")
    if fresh is None:
        print("The fresh make run never served its first page; its last lines:")
        print("\n".join(log[-30:]))
        return 1
    print(f"  make run, fresh (empty caches): first page after {fresh:6.1f} s "
          f"(install {install or 0:5.1f} s of it); goal under {GOAL_SECONDS:.0f} s: "
          f"{'met' if fresh < GOAL_SECONDS else 'MISSED'}")
    print(f"  make run, second time:          first page after {warm or float('nan'):6.1f} s")
    print(f"  the virtualenv: {size:.0f} MiB (serving only; make test adds the test tools)")
    if keep:
        print(f"  kept: {tmp}")
    return 0 if fresh < GOAL_SECONDS else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the throwaway copy")
    sys.exit(main(parser.parse_args().keep))
