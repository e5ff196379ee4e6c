"""Knowledge and memory at run time: passages and memories go into a task's context before it
runs; what the task taught the crew is saved after it (one ``memory`` LLM call).

The site hands the crew runtime a ``KnowledgeBase`` (searches and storage live there); this module
decides what fits the prompt and says what was used (``knowledge.retrieved``, ``memory.recalled``,
``memory.saved``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.engine.events import Event, EventSink
from agents.engine.llm import LLMError, LLMRequest
from agents.engine.prompts import PromptBook
from agents.engine.runtime import EventEmitter, RunContext
from agents.engine.specs import LLMSpec
from crews.engine.specs import CrewTaskSpec

# How long a memory line may be, and how many lines one task may leave.
MEMORY_LINE_CHARS = 500
MEMORY_LINES = 3


@dataclass(frozen=True, slots=True)
class Passage:
    source_id: int
    source: str  # the source's title, as the prompt names it
    text: str


@dataclass(frozen=True, slots=True)
class Recollection:
    id: int
    text: str


class KnowledgeBase(Protocol):
    """What a run may read and keep. ``remembers``: the crew's memory is on."""

    remembers: bool
    knowledge_tokens: int  # the most passage text a task's prompt gets (4 characters a token)
    memory_tokens: int

    async def passages(self, *, agent_key: str | None, query: str) -> Sequence[Passage]:
        """The best passages of the agent's and the crew's sources for ``query``, best first."""
        ...

    async def memories(self, *, query: str) -> Sequence[Recollection]:
        """The crew's memories that best match ``query``, best first (none when memory is off)."""
        ...

    async def save(self, *, task_key: str, lines: Sequence[str]) -> Sequence[Recollection]: ...

    async def titles(self, *, agent_key: str | None) -> Sequence[str]:
        """The titles of the sources a task of the agent reads (its own and the crew's); the
        crew's alone for ``None``."""
        ...


def estimate_tokens(text: str) -> int:
    """As the LLM caller estimates a prompt: four characters a token."""
    return len(text) // 4 + 1


def _within(texts: Sequence[str], budget: int) -> list[str]:
    """The texts in order while they fit ``budget`` tokens; the first is cut to fit if it alone
    does not (a long chunk still gives the task something)."""
    kept: list[str] = []
    left = budget
    for text in texts:
        cost = estimate_tokens(text)
        if cost <= left:
            kept.append(text)
            left -= cost
        elif not kept and left > 0:
            kept.append(text[: left * 4 - 1].rstrip() + "…")
            break
        else:
            break
    return kept


def _query(task: CrewTaskSpec) -> str:
    return "\n".join(p for p in (task.name, task.description, task.expected_output) if p)


def _unique(passages: Sequence[Passage]) -> list[Passage]:
    """``passages`` in order, each chunk once (a step's search often finds the task's again)."""
    seen: set[tuple[int, str]] = set()
    kept: list[Passage] = []
    for p in passages:
        if (p.source_id, p.text) not in seen:
            seen.add((p.source_id, p.text))
            kept.append(p)
    return kept


async def _give(
    ctx: RunContext, base: KnowledgeBase, found: Sequence[Passage], *, step_id: str | None = None,
    titles: Sequence[str] = (),
) -> tuple[str | None, list[Passage]]:
    """The ``knowledge`` block of ``found`` within the token budget, and the passages it holds;
    emits ``knowledge.retrieved`` when it holds any. ``titles``: every source the reader may
    search, named in the heading even when none of them matched (the manager's view)."""
    book = ctx.prompts if ctx.prompts is not None else PromptBook()
    texts = _within([f"[{p.source}] {p.text}" for p in found], base.knowledge_tokens)
    used = list(found[: len(texts)])
    if not used and not titles:
        return None, []
    sources = list(titles) or list(dict.fromkeys(p.source for p in used))
    passages = "\n\n".join(texts) or book.render("none")
    block = book.render("knowledge", sources=", ".join(sources), passages=passages)
    if used:
        data: dict[str, Any] = {
            "source_ids": list(dict.fromkeys(p.source_id for p in used)),
            "chunks": [
                {"source": p.source_id, "title": p.source, "text": t.removeprefix(f"[{p.source}] ")}
                for p, t in zip(used, texts, strict=True)
            ],
        }
        if step_id is not None:
            data["step_id"] = step_id
        await ctx.emit("knowledge.retrieved", data, step_id=step_id)
    return block, used


@dataclass
class TaskKnowledge:
    """What a task was given from its sources, and the search before each of its steps
    (``agents.engine.runtime.StepKnowledge``: a Plan-and-Act step, or an approved plan's)."""

    base: KnowledgeBase
    agent_key: str | None
    passages: list[Passage]
    block: str | None  # the task's ``knowledge`` block, as its context holds it

    async def for_step(self, ctx: RunContext, *, step_id: str, text: str, context: Sequence[str]) -> tuple[str, ...]:
        """``context`` for the step: the step's best passages first, then the task's not among
        them, within the same budget, in place of the task's block. A step whose search finds
        nothing the task was not given keeps the task's context, and no event is emitted."""
        found = list(await self.base.passages(agent_key=self.agent_key, query=text))
        known = {(p.source_id, p.text) for p in self.passages}
        if all((p.source_id, p.text) in known for p in found):
            return tuple(context)
        block, _used = await _give(ctx, self.base, _unique([*found, *self.passages]), step_id=step_id)
        rest = [c for c in context if self.block is None or c != self.block]
        return (block, *rest) if block is not None else tuple(rest)


@dataclass
class Recalled:
    blocks: list[str]  # the context blocks, in order: knowledge, then memories
    knowledge: TaskKnowledge  # for the task's steps


async def recall(
    ctx: RunContext, base: KnowledgeBase, task: CrewTaskSpec, agent_key: str | None, *,
    query: str | None = None, titles: Sequence[str] = (), memories: bool = True,
) -> Recalled:
    """The context blocks for ``task`` (or for ``query``, a delegated piece of it): its knowledge
    passages and the crew's memories, each under its heading and within its token budget; emits
    what was used. ``titles`` name every source in the heading (the manager's view)."""
    book = ctx.prompts if ctx.prompts is not None else PromptBook()
    query = query or _query(task)
    blocks: list[str] = []
    found = list(await base.passages(agent_key=agent_key, query=query))
    block, used = await _give(ctx, base, found, titles=titles)
    if block is not None:
        blocks.append(block)
    if memories and base.remembers:
        items = list(await base.memories(query=query))
        lines = _within([f"- {m.text}" for m in items], base.memory_tokens)
        if lines:
            blocks.append(book.render("memory_recalled", memories="\n".join(lines)))
            await ctx.emit("memory.recalled", {
                "items": [{"id": m.id, "text": m.text} for m in items[: len(lines)]],
            })
    return Recalled(blocks, TaskKnowledge(base, agent_key, used, block))


# The crew planner sees a few passages per task: enough to plan around a source, while the task
# itself gets its full share when it runs.
PLANNER_PASSAGES = 3
# All tasks' listings go into one crew_plan request, so the planner is shown passages of the crew's
# shared sources only: an agent's own sources are for it alone (their titles say what it will read).
PLANNER_SHARED_ONLY = (
    "The passages below come from the crew's shared sources; the agent searches its own sources "
    "itself when the task runs."
)


async def planner_view(base: KnowledgeBase, book: PromptBook, task: CrewTaskSpec, agent_key: str | None) -> str | None:
    """What the crew planner is told of ``task``'s sources: the titles its agent may search (its
    own and the crew's) and the best few passages of the crew's shared sources for the task,
    within the token budget; None when it has no source."""
    titles = list(await base.titles(agent_key=agent_key))
    if not titles:
        return None
    found = list(await base.passages(agent_key=None, query=_query(task)))[:PLANNER_PASSAGES]
    texts = _within([f"[{p.source}] {p.text}" for p in found], base.knowledge_tokens)
    passages = "\n\n".join(texts) or book.render("none")
    return book.render("knowledge", sources=", ".join(titles), passages=f"{PLANNER_SHARED_ONLY}\n\n{passages}")


@dataclass
class TaskNotes:
    """What a person and the checks said during a task, for its memory."""

    feedback: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class _NotingSink:
    """Passes every event on, noting a person's feedback and failed checks."""

    def __init__(self, sink: EventSink, notes: TaskNotes) -> None:
        self.sink = sink
        self.notes = notes
        self.keeps_llm_calls = bool(getattr(sink, "keeps_llm_calls", False))

    async def emit(self, event: Event) -> None:
        if event.type == "feedback.received" and str(event.data.get("text") or "").strip():
            self.notes.feedback.append(str(event.data["text"]).strip())
        elif event.type == "guardrail.failed":
            self.notes.failures.extend(str(r) for r in event.data.get("reasons") or ())
        await self.sink.emit(event)


def noting(ctx: RunContext, notes: TaskNotes) -> RunContext:
    """``ctx`` (a task's view) whose events also fill ``notes``."""
    ctx.emit = EventEmitter(sink=_NotingSink(ctx.emit.sink, notes), clock=ctx.emit.clock, task_id=ctx.emit.task_id)
    return ctx


async def learn(
    ctx: RunContext, base: KnowledgeBase, llm: LLMSpec, task: CrewTaskSpec, answer: str, notes: TaskNotes
) -> None:
    """Save what ``task`` taught the crew: a person's feedback verbatim, and a few lines from one
    ``memory`` LLM call on the answer and the failed checks. A failed call saves the feedback
    alone; the task's outcome stands either way."""
    book = ctx.prompts if ctx.prompts is not None else PromptBook()
    none = book.render("none")
    lines = [f"Feedback from a person on “{task.name or task.description[:60]}”: {f}" for f in notes.feedback]
    prompt = book.render(
        "memory",
        description=task.description,
        answer=answer,
        feedback="\n".join(notes.feedback) or none,
        failures="\n".join(f"- {f}" for f in notes.failures) or none,
    )
    try:
        reply = await ctx.llm.call(
            LLMRequest(llm=llm, messages=[{"role": "user", "content": prompt}], purpose="memory")
        )
    except LLMError:
        reply = None
    if reply is not None:
        learned = [ln.strip(" -*•\t") for ln in (reply.content or "").splitlines()]
        lines += [ln[:MEMORY_LINE_CHARS] for ln in learned if ln][:MEMORY_LINES]
    if not lines:
        return
    saved = await base.save(task_key=task.key, lines=lines)
    data: dict[str, Any] = {"items": [{"id": m.id, "text": m.text} for m in saved]}
    await ctx.emit("memory.saved", data)
