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


async def recall(ctx: RunContext, base: KnowledgeBase, task: CrewTaskSpec, agent_key: str | None) -> list[str]:
    """The context blocks for ``task``: its knowledge passages and the crew's memories, each under
    its heading and within its token budget; emits what was used."""
    book = ctx.prompts if ctx.prompts is not None else PromptBook()
    query = _query(task)
    blocks: list[str] = []
    found = list(await base.passages(agent_key=agent_key, query=query))
    texts = _within([f"[{p.source}] {p.text}" for p in found], base.knowledge_tokens)
    used = found[: len(texts)]
    if used:
        sources = list(dict.fromkeys(p.source for p in used))
        blocks.append(book.render("knowledge", sources=", ".join(sources), passages="\n\n".join(texts)))
        await ctx.emit("knowledge.retrieved", {
            "source_ids": list(dict.fromkeys(p.source_id for p in used)),
            "chunks": [
                {"source": p.source_id, "title": p.source, "text": t.removeprefix(f"[{p.source}] ")}
                for p, t in zip(used, texts, strict=True)
            ],
        })
    if base.remembers:
        items = list(await base.memories(query=query))
        lines = _within([f"- {m.text}" for m in items], base.memory_tokens)
        if lines:
            blocks.append(book.render("memory_recalled", memories="\n".join(lines)))
            await ctx.emit("memory.recalled", {
                "items": [{"id": m.id, "text": m.text} for m in items[: len(lines)]],
            })
    return blocks


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
