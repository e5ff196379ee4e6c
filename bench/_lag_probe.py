"""``manage.py serve`` with a probe of its event loop's lag, for bench/soak.py.

    PROBE_OUT=/tmp/lag.json .venv/bin/python bench/_lag_probe.py manage.py serve --port 8001

Every 10 ms a task on the server's loop notes how late it woke; at exit it writes every pause
over 20 ms with its wall-clock time (so a bench can count those of its own window only) and the
samples' count to ``PROBE_OUT`` as JSON.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import runpy
import sys
import time

import _common  # noqa: F401 - puts the repository on sys.path

INTERVAL = 0.01
stats: dict[str, object] = {"pauses": [], "samples": 0}


async def probe() -> None:
    while True:
        started = time.perf_counter()
        await asyncio.sleep(INTERVAL)
        late = (time.perf_counter() - started - INTERVAL) * 1000
        stats["samples"] = int(stats["samples"]) + 1  # type: ignore[call-overload]
        if late > 20:
            stats["pauses"].append([time.time(), late])  # type: ignore[union-attr]


def write() -> None:
    with open(os.environ["PROBE_OUT"], "w") as file:
        json.dump(stats, file)


if __name__ == "__main__":
    import daphne.server  # noqa: F401 - installs Twisted's asyncio reactor, as serve does
    from twisted.internet import reactor

    reactor.callWhenRunning(lambda: asyncio.ensure_future(probe()))
    atexit.register(write)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
