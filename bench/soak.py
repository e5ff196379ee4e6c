"""The first run after "ready", and a soak of runs: CPU per run, memory, the server loop's pauses.

    .venv/bin/python bench/soak.py [--runs 100] [--paths direct,litellm]

For each path (``direct``: ``openai/…`` models on agents.engine.wire, as shipped; ``litellm``: the
same with ``PLANNER_LLM_PATH=litellm``) it starts ``manage.py serve`` on a throwaway database,
makes a two-task crew through the API whose LLM is the fake OpenAI server in this process (no
delay), and stops; then it starts the server again, as a configured site starts, with a loop-lag
probe (bench/_lag_probe.py), and from "ready" kicks off ``--runs`` runs one after the other, each
followed on its JSON socket to its end. It prints (issue #20's targets):

- the first run's time against the median of the later ones (target: within 1 s);
- the server's CPU per run and runs per CPU-second;
- the server's RSS at its start ("serving at", before warming), at "ready" (warm), after 10 runs
  and after the last (target: < 150 MiB, no growth);
- the server loop's longest pause and how many exceeded 50 ms (target: none);
- the load average, as every bench here does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import ROOT, table
from runs_server import FINAL, Api, LiveServer, cpu_seconds, follow, kickoff

sys.path.insert(0, str(ROOT))
from tests.fakes.openai_server import FakeLLMServer, Reply  # noqa: E402


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def setup(api: Api, base_url: str) -> int:
    import httpx

    async with httpx.AsyncClient(base_url=api.base, headers=api.headers, timeout=30) as client:

        async def post(path: str, body: dict) -> dict:
            response = await client.post(path, json=body)
            if response.status_code not in (200, 201):
                raise RuntimeError(f"POST {path} answered {response.status_code}: {response.text}")
            return response.json()

        llm = await post("/api/llms", {"name": "Soak", "model": "openai/soak", "api_base": base_url,
                                       "api_key": "sk-soak", "supports_tools": False})
        agent = await post("/api/agents", {"name": "Soak agent", "role": "Analyst", "goal": "Answer briefly",
                                           "llm_id": llm["id"]})
        crew = await post("/api/crews", {"name": "Soak", "agent_ids": [agent["id"]], "planning": False})
        for n in (1, 2):
            await post(f"/api/crews/{crew['id']}/tasks", {"name": f"Step {n}", "description": f"Check figure {n}.",
                                                          "expected_output": "One line", "agent_id": agent["id"]})
        return int(crew["id"])


async def one_run(api: Api, client: object, crew_id: int) -> float:
    started = time.perf_counter()
    run_id = await kickoff(client, crew_id)
    kind, ended = await follow(api, run_id)
    if kind != "run.succeeded":
        raise RuntimeError(f"run {run_id} ended {kind}")
    return ended - started


def _rss_when_serving(server: LiveServer) -> dict[str, float]:
    """The server's RSS when it prints "serving at" (pages answer, workers not warm yet), noted
    by a thread while ``server.start()`` waits for "ready"; read the dict once that returns."""
    noted: dict[str, float] = {}
    before, seen = server.process, len(server.lines)  # the lines of earlier starts stay in the list

    def watch() -> None:
        nonlocal seen
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "rss" not in noted:
            process, lines = server.process, server.lines
            if process is not None and process is not before:
                for line in lines[seen:]:
                    if "is serving at" in line:
                        noted["rss"] = rss_mib(process.pid)
                seen = len(lines)
            time.sleep(0.005)  # polling another process's output

    threading.Thread(target=watch, daemon=True).start()
    return noted


async def soak(path: str, runs: int, fake: FakeLLMServer) -> dict[str, float]:
    import httpx

    with tempfile.TemporaryDirectory(prefix="soak-") as var:
        out = Path(var) / "lag.json"
        extra = {"PROBE_OUT": str(out), **({"PLANNER_LLM_PATH": "litellm"} if path == "litellm" else {})}
        server = LiveServer(var=Path(var), extra_env=extra, launcher=[str(ROOT / "bench" / "_lag_probe.py")])
        token = server.bootstrap()
        server.start()  # once to set the crew up through the API, then again: a configured site
        try:
            crew_id = await setup(Api(server.base, token), fake.base_url)
        finally:
            server.stop()
        started = time.perf_counter()
        at_start = _rss_when_serving(server)
        server.start()
        ready_s = time.perf_counter() - started
        assert server.process is not None
        rss_ready = rss_mib(server.process.pid)
        soak_from = time.time()
        try:
            assert server.process is not None
            pid = server.process.pid
            api = Api(server.base, token)
            times: list[float] = []
            rss_10 = 0.0
            cpu_before = cpu_seconds(pid)
            async with httpx.AsyncClient(base_url=api.base, headers=api.headers, timeout=60) as client:
                for n in range(runs):
                    times.append(await one_run(api, client, crew_id))
                    if n == 9:
                        rss_10 = rss_mib(pid)
            cpu = cpu_seconds(pid) - cpu_before
            rss_end = rss_mib(pid)
        finally:
            server.stop()
        probe = json.loads(out.read_text()) if out.exists() else {"pauses": []}
        pauses = [late for at, late in probe["pauses"] if at >= soak_from]  # the soak's, not start-up's
        if os.environ.get("SOAK_DEBUG"):
            ends = [sum(times[: i + 1]) for i in range(len(times))]
            for at, late in probe["pauses"]:
                if at >= soak_from and late > 50:
                    run = next((i for i, end in enumerate(ends) if at - soak_from <= end), len(ends))
                    print(f"  pause {late:.0f} ms at {at - soak_from:.2f} s, during run {run + 1}")
        lag = {"max_ms": max(pauses, default=0.0), "over_50ms": sum(late > 50 for late in pauses)}
    later = statistics.median(times[1:]) if len(times) > 1 else float("nan")
    return {
        "ready_s": ready_s, "first_s": times[0], "later_s": later, "cpu_ms": cpu / runs * 1000,
        "rss_start": at_start.get("rss", float("nan")), "rss_ready": rss_ready, "rss_10": rss_10, "rss_end": rss_end, "lag_max": lag["max_ms"], "lag_over": lag["over_50ms"],
    }


async def main(runs: int, paths: list[str]) -> None:
    load_before = os.getloadavg()[0]
    results: dict[str, dict[str, float]] = {}
    with FakeLLMServer() as fake:
        fake.default = Reply.text(FINAL)
        for path in paths:
            results[path] = await soak(path, runs, fake)
    print(f"Soak: {runs} two-task runs one after another, per path; {os.cpu_count()} CPUs; load average "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after\n")
    rows = []
    for path, r in results.items():
        rows.append([
            path, f"{r['ready_s']:.1f}", f"{r['first_s']:.2f}", f"{r['later_s']:.2f}", f"{r['first_s'] - r['later_s']:+.2f}",
            f"{r['cpu_ms']:.0f}", f"{1000 / r['cpu_ms']:.1f}", f"{r['rss_start']:.0f}", f"{r['rss_ready']:.0f}",
            f"{r['rss_10']:.0f}", f"{r['rss_end']:.0f}",
            f"{r['lag_max']:.0f}", str(int(r['lag_over'])),
        ])
    print(table(rows, ["path", "ready s", "first run s", "later median s", "first − later s", "server CPU/run ms",
                       "runs per CPU-s", "RSS at start MiB", "RSS at ready MiB", "RSS @10 MiB", f"RSS @{runs} MiB", "loop lag max ms", "pauses > 50 ms"],
                text_columns=1))
    if len(results) == 2 and "direct" in results and "litellm" in results:
        d, lt = results["direct"], results["litellm"]
        print(f"\ndirect / litellm, same run: server CPU per run {d['cpu_ms'] / lt['cpu_ms']:.2f}x, "
              f"RSS {d['rss_end'] / lt['rss_end']:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--paths", default="direct,litellm")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.paths.split(",")))
