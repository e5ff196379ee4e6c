"""(c)'s floor in bench/runs.py: the CPU a run cannot do without, each as many at once as in (c):
a litellm call (in a process of its own), a bare API request, a websocket replaying a run.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

from _common import PYTHON, ROOT
from runs_server import Api, cpu_seconds, follow, runs_at_once

RUNS_SCRIPT = str(ROOT / "bench" / "runs.py")  # the children re-run the bench in a mode of theirs

FLOOR_ROUNDS = 8


def litellm_floor(base_url: str, count: int) -> None:
    """``--litellm-floor URL``: CPU ms per ``litellm.acompletion`` call, with the arguments
    ``LiteLLMGateway`` gives it for the bench's runs (not streamed), ``count`` calls at once
    against the fake LLM at ``base_url``, alone in this process: printed as JSON. The fake LLM
    is in the parent, so its threads are not in the figure."""
    import litellm
    from pydantic import SecretStr

    from agents.engine.gateway import LiteLLMGateway
    from agents.engine.llm import LLMRequest
    from agents.engine.specs import LLMSpec

    llm = LLMSpec(
        key="floor", model="openai/bench", api_base=base_url, api_key=SecretStr("sk-bench")
    )
    messages = [
        {"role": "system", "content": "You are Analyst. A careful analyst. Answer briefly."},
        {"role": "user", "content": "Check figure 1 and say it is fine. Expected output: One line"},
    ]
    request = LLMRequest(llm=llm, messages=messages, purpose="react")
    kwargs = LiteLLMGateway()._kwargs(request, "sk-bench")

    async def rounds(n: int) -> None:
        for _ in range(n):
            await asyncio.gather(*(litellm.acompletion(**kwargs) for _ in range(count)))

    async def main() -> float:
        await rounds(3)  # litellm's first calls (imports, price lookups, connections)
        began = time.process_time()
        await rounds(FLOOR_ROUNDS)
        return (time.process_time() - began) / (FLOOR_ROUNDS * count)

    print(json.dumps({"litellm_call": asyncio.run(main()) * 1000}))


def measure_floor(api: Api, pid: int, llm_base: str, crew_id: int, count: int) -> dict[str, float]:
    """CPU ms of the parts a run cannot do without, each ``count`` at once as in (c): one
    litellm call (in a process of its own), and on the server one API request refused before
    any database work (401), and one websocket that replays a finished run and closes."""
    import httpx

    done = subprocess.run(
        [PYTHON, RUNS_SCRIPT, "--litellm-floor", llm_base, "--runs-at-once", str(count)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    floor = json.loads(done.stdout.strip().splitlines()[-1])

    async def requests() -> float:
        async with httpx.AsyncClient(
            base_url=api.base, limits=httpx.Limits(max_connections=count + 5)
        ) as client:
            for rounds in (2, FLOOR_ROUNDS):
                began = cpu_seconds(pid)
                for _ in range(rounds):
                    answers = await asyncio.gather(*(client.get("/api/runs") for _ in range(count)))
                    if {a.status_code for a in answers} != {401}:
                        raise RuntimeError(f"expected 401s, got {[a.status_code for a in answers]}")
            return (cpu_seconds(pid) - began) / (FLOOR_ROUNDS * count)

    async def sockets(run_id: int) -> float:
        for rounds in (1, FLOOR_ROUNDS):
            began = cpu_seconds(pid)
            for _ in range(rounds):
                await asyncio.gather(*(follow(api, run_id) for _ in range(count)))
        return (cpu_seconds(pid) - began) / (FLOOR_ROUNDS * count)

    floor["request"] = asyncio.run(requests()) * 1000
    _seconds, _outcomes, ids = asyncio.run(runs_at_once(api, crew_id, 1))
    floor["socket"] = asyncio.run(sockets(ids[0])) * 1000
    return floor
