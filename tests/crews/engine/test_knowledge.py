"""Knowledge where a crew uses it (issue #19): the crew planner, each Plan-and-Act step, and a
hierarchical crew's manager and the coworkers it delegates to; over a fake knowledge base."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from agents.engine.llm import LLMRequest, tool_call_response
from crews.engine.kickoff import run_crew
from crews.engine.knowledge import Passage, Recollection
from crews.engine.planner import SUBMIT_TOOL, draft_crew_plan
from tests.agents.engine.helpers import make_ctx, make_llm
from tests.crews.engine.helpers import make_crew, researcher, writer

STYLE = Passage(1, "Style guide", "Reports open with a one-line summary in bold.")
TIDES = Passage(2, "Tide tables", "High tide at Porto Fundo falls at 06:40 on solstice morning.")
FERRY = Passage(3, "Ferry notes", "The island ferry carries twelve bicycles at most.")
HISTORY = Passage(5, "Tide history", "Porto Fundo tides were first measured in 1902 by the harbour master.")
HIDDEN = Passage(4, "Writer drafts", "The writer keeps a secret draft about lighthouse ghosts.")


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 4}


@dataclass
class FakeKnowledge:
    """Sources by owner (None: the crew's; an agent's key: its own); a passage matches a query
    sharing a word of five letters or more with it, most shared words first."""

    owned: dict[str | None, list[Passage]]
    knowledge_tokens: int = 500
    memory_tokens: int = 100
    remembers: bool = False
    queries: list[tuple[str | None, str]] = field(default_factory=list)

    def _readable(self, agent_key: str | None) -> list[Passage]:
        own = self.owned.get(agent_key, []) if agent_key is not None else []
        return [*self.owned.get(None, []), *own]

    async def passages(self, *, agent_key: str | None, query: str) -> Sequence[Passage]:
        self.queries.append((agent_key, query))
        scored = [(len(_words(query) & _words(p.text)), p) for p in self._readable(agent_key)]
        return [p for n, p in sorted(scored, key=lambda s: -s[0]) if n]

    async def memories(self, *, query: str) -> Sequence[Recollection]:
        return []

    async def save(self, *, task_key: str, lines: Sequence[str]) -> Sequence[Recollection]:
        return []

    async def titles(self, *, agent_key: str | None) -> Sequence[str]:
        return [p.source for p in self._readable(agent_key)]


@dataclass
class RememberingKnowledge(FakeKnowledge):
    """A crew with memory on: one memory recalled, what is saved kept."""

    saved: list[list[str]] = field(default_factory=list)

    async def memories(self, *, query: str) -> Sequence[Recollection]:
        return [Recollection(7, "Readers want the tide times first.")]

    async def save(self, *, task_key: str, lines: Sequence[str]) -> Sequence[Recollection]:
        self.saved.append(list(lines))
        return [Recollection(8, line) for line in lines]


def prompt(request: LLMRequest) -> str:
    return "\n".join(str(m["content"]) for m in request.messages if m["role"] == "user")


def answer(text: str) -> str:
    return f"Thought: done\nFinal Answer: {text}"


# The crew planner ------------------------------------------------------------------------------


async def test_the_crew_planner_sees_each_tasks_titles_and_only_the_crews_shared_passages() -> None:
    crew = make_crew(tasks=2).interpolated({"topic": "Porto Fundo tides"})
    base = FakeKnowledge({None: [HISTORY], "a1": [TIDES], "a2": [HIDDEN]})
    reply = tool_call_response(SUBMIT_TOOL, {"plans": [{"task_number": 1, "steps": ["a"]},
                                                       {"task_number": 2, "steps": ["b"]}]})
    ctx, gateway, _sink, _ = make_ctx([reply])

    draft = await draft_crew_plan(ctx, crew, llm=crew.planning_llm, knowledge=base)

    assert draft.steps == {"11": ["a"], "12": ["b"]}
    sent = "\n".join(str(m["content"]) for m in gateway.requests[0].messages)
    # One request holds every task: an agent's own passages would reach the other agents' steps.
    assert "06:40" not in sent and "lighthouse ghosts" not in sent
    first, second = prompt(gateway.requests[0]).split("## Task 2: Report")
    assert "Knowledge from your sources (Tide history, Tide tables)" in first  # its agent's own, by title
    assert "[Tide history] Porto Fundo tides were first measured" in first  # the crew's best passage
    assert "the agent searches its own sources itself when the task runs" in first
    assert "Writer drafts" not in first  # the other agent's own source
    assert "Knowledge from your sources (Tide history, Writer drafts)" in second
    assert "Tide tables" not in second
    assert {agent for agent, _query in base.queries} == {None}


async def test_the_crew_planner_keeps_each_tasks_passages_within_the_knowledge_budget() -> None:
    crew = make_crew(tasks=1).interpolated({"topic": "Porto Fundo tides"})
    base = FakeKnowledge({None: [TIDES, HISTORY]}, knowledge_tokens=20)  # about 80 characters
    reply = tool_call_response(SUBMIT_TOOL, {"plans": [{"task_number": 1, "steps": ["a"]}]})
    ctx, gateway, _sink, _ = make_ctx([reply])

    await draft_crew_plan(ctx, crew, llm=crew.planning_llm, knowledge=base)

    text = prompt(gateway.requests[0])
    assert "Knowledge from your sources (Tide tables, Tide history)" in text  # every title
    passage = text.split("[Tide history] ", 1)[1].split("\n")[0]  # the best one, cut to fit
    assert passage.startswith("Porto Fundo tides were first") and len(passage) <= 20 * 4
    assert "06:40" not in text  # the second passage did not fit


async def test_a_crew_without_a_knowledge_base_plans_as_before() -> None:
    crew = make_crew(tasks=1).interpolated({"topic": "AI"})
    ctx, gateway, _sink, _ = make_ctx([tool_call_response(SUBMIT_TOOL, {"plans": [{"task_number": 1, "steps": ["a"]}]})])
    await draft_crew_plan(ctx, crew, llm=crew.planning_llm)
    assert "Knowledge from your sources" not in prompt(gateway.requests[0])


# Plan-and-Act steps ----------------------------------------------------------------------------


def _plan_and_act_crew() -> object:
    tools_llm = make_llm(key="thinker", supports_tools=True)
    agents = (researcher(llm=tools_llm, planning=True), writer())
    return make_crew(tasks=1, agents=agents).interpolated({"topic": "Porto Fundo"})


async def test_each_plan_and_act_step_searches_for_its_own_text_and_keeps_the_tasks_passages() -> None:
    crew = _plan_and_act_crew()
    base = FakeKnowledge({None: [STYLE], "a1": [TIDES, FERRY]})
    steps = [
        {"number": 1, "description": "Check when the tide is high", "tool": None, "depends_on": []},
        {"number": 2, "description": "Count how many bicycles the ferry carries", "tool": None, "depends_on": []},
    ]
    ctx, gateway, sink, _ = make_ctx(
        [tool_call_response("create_plan", {"plan": "Two lookups", "steps": steps, "ready": True})],
        default=answer("Noted."),
    )
    result = await run_crew(ctx, crew, knowledge=base)

    assert not result.failed
    step_requests = [r for r in gateway.requests if r.purpose == "step"]
    assert len(step_requests) == 2
    one, two = (prompt(r) for r in step_requests)
    assert "twelve bicycles" not in one  # step 1's search found nothing new
    assert "twelve bicycles" in two  # the step's own passage …
    assert two.count("High tide at Porto Fundo") == 1  # … merged with the task's, once
    assert two.index("twelve bicycles") < two.index("High tide at Porto Fundo")  # the step's first
    # The task's search ("Research Porto Fundo") found the tide table; step 2's, the ferry notes.
    task_event, step_event = sink.of_type("knowledge.retrieved")
    assert task_event.step_id is None and [c["title"] for c in task_event.data["chunks"]] == ["Tide tables"]
    assert step_event.step_id is not None and step_event.step_id == step_event.data["step_id"]
    assert step_event.task_id == "11"
    assert [c["title"] for c in step_event.data["chunks"]] == ["Ferry notes", "Tide tables"]
    started = next(e for e in sink.events if e.type == "step.started" and e.step_id == step_event.step_id)
    assert started.data["number"] == 2
    kinds = [e.type for e in sink.events if e.step_id == step_event.step_id]
    assert kinds[:3] == ["step.started", "knowledge.retrieved", "llm.started"]


async def test_a_step_keeps_within_the_budget_with_its_own_passage_first() -> None:
    crew = make_crew(tasks=1, planning=False).interpolated({"topic": "Porto Fundo"})
    base = FakeKnowledge({"a1": [TIDES, FERRY]}, knowledge_tokens=20)
    ctx, gateway, sink, _ = make_ctx(default=answer("Noted."))

    await run_crew(ctx, crew, plan={"11": ["Count the bicycles the ferry carries"]}, knowledge=base)

    [request] = [r for r in gateway.requests if r.purpose == "step"]
    text = prompt(request)
    assert "twelve bicycles" in text and "High tide" not in text  # one passage fits: the step's
    assert sink.of_type("knowledge.retrieved")[-1].step_id == "11.p1"


# Hierarchical crews ----------------------------------------------------------------------------


async def test_a_delegated_coworker_reads_its_own_sources_and_the_manager_sees_every_title() -> None:
    crew = make_crew(tasks=1, process="hierarchical", manager_llm=make_llm(key="boss", supports_tools=True))
    crew = crew.interpolated({"topic": "Porto Fundo"})
    base = FakeKnowledge({None: [STYLE], "a1": [TIDES], "a2": [HIDDEN]})
    ctx, gateway, sink, _ = make_ctx([
        tool_call_response("delegate_work_to_coworker",
                           {"task": "Find when the tide is high at Porto Fundo", "coworker": "Porto Fundo Researcher"}),
        answer("06:40"),
        answer("High tide is at 06:40."),
    ])

    result = await run_crew(ctx, crew, knowledge=base)

    assert result.output == "High tide is at 06:40."
    manager = prompt(gateway.requests[0])
    assert "Knowledge from your sources (Style guide, Tide tables (Porto Fundo Researcher), " \
           "Writer drafts (Writer))" in manager
    assert "High tide at Porto Fundo" not in manager  # the coworker's own passage is the coworker's
    coworker = prompt(gateway.requests[1])
    assert "Find when the tide is high" in coworker
    assert "[Tide tables] High tide at Porto Fundo falls at 06:40" in coworker
    assert "lighthouse ghosts" not in coworker  # another coworker's source
    assert ("a1", "Find when the tide is high at Porto Fundo") in base.queries
    delegated = sink.of_type("knowledge.retrieved")[-1]
    assert delegated.task_id == "11" and [c["title"] for c in delegated.data["chunks"]] == ["Tide tables"]


async def test_a_hierarchical_crew_with_memory_recalls_before_the_managers_task_and_learns_after() -> None:
    crew = make_crew(tasks=1, process="hierarchical", manager_llm=make_llm(key="boss", supports_tools=True))
    crew = crew.interpolated({"topic": "Porto Fundo"})
    base = RememberingKnowledge({None: [STYLE]}, remembers=True)
    ctx, gateway, sink, _ = make_ctx([answer("Done without help."), "Ferries run at nine."])

    await run_crew(ctx, crew, knowledge=base)

    assert "Readers want the tide times first." in prompt(gateway.requests[0])
    assert [r.purpose for r in gateway.requests][-1] == "memory"
    assert base.saved == [["Ferries run at nine."]]
    assert [e.type for e in sink.events if e.type.startswith("memory.")] == ["memory.recalled", "memory.saved"]

