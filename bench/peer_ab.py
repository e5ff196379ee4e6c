"""The full app's planned 2-task run (bench/peer_app.py) on two servers in turns: this checkout
and another (``--against DIR``, e.g. ``git worktree add /tmp/base HEAD~3``), both on this venv,
against one fake server. Server CPU is each thread's ``schedstat`` (nanoseconds), summed; the
figures are means and medians over many runs taken alternately, so a busier minute moves both.

    .venv/bin/python bench/peer_ab.py --against /tmp/base --runs 30
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
from pathlib import Path

from _common import PYTHON, ROOT
from peer import LOG, Fake
from peer_app import running_app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", type=Path, required=True, help="the other checkout (its manage.py)")
    parser.add_argument("--runs", type=int, default=30, help="runs per server and mode")
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    LOG.parent.mkdir(exist_ok=True)
    cpu: dict[tuple[str, bool], list[float]] = {}
    with LOG.open("w") as log, contextlib.ExitStack() as stack:
        fake = Fake([PYTHON, str(ROOT / "bench" / "peer.py"), "--serve-fake"], log)
        stack.callback(fake.close)
        apps = {"this": stack.enter_context(running_app(fake.base_url)),
                "other": stack.enter_context(running_app(fake.base_url, root=args.against.resolve()))}
        load = os.getloadavg()[0]
        for n in range(args.warmup + args.runs):
            for deltas in (False, True):
                for name in (("this", "other") if n % 2 else ("other", "this")):
                    run = asyncio.run(apps[name].run(deltas=deltas, count_calls=fake.counts))
                    if n >= args.warmup:
                        cpu.setdefault((name, deltas), []).append(run.cpu * 1000)
    print(f"{args.runs} runs per server and mode, in turns; load average {load:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after; server CPU ms per run (threads' schedstat)")
    print(f"{'mode':<32} {'this mean':>10} {'other mean':>11} {'ratio':>6} {'this median':>12} {'other median':>13}")
    for deltas in (False, True):
        this, other = cpu[("this", deltas)], cpu[("other", deltas)]
        mode = "one viewer following the deltas" if deltas else "nobody follows the deltas"
        print(f"{mode:<32} {statistics.mean(this):>10.1f} {statistics.mean(other):>11.1f} "
              f"{statistics.mean(this) / statistics.mean(other):>5.2f}× {statistics.median(this):>12.1f} "
              f"{statistics.median(other):>13.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
