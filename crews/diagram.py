"""A picture of a crew: its tasks in order, the agent on each, the context links between them and
(hierarchical) the manager, laid out here and drawn as SVG by ``templates/crews/_diagram.html``.

Only geometry lives here; the markup, the words and their translations are the template's. The
layout is one column (it reads the same at 360 px as at 1366 px): a box a task, an arrow down to
the next, and each context link that skips a task as a curve on the right, one lane a link so
curves never overlap. A hierarchical crew's manager stands above, with a line to every task. On a
run's page each box has a third line: the task's status and how many of its steps are done.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

WIDTH = 360
BOX_WIDTH = 264
BOX_HEIGHT = 56
GAP = 28
LANE = 12  # the room a context curve takes on the right
MARGIN = 8
MANAGER_HEIGHT = 40
STATUS_LINE = 20  # a run's boxes: the line with the task's status and steps
INDENT = 24
TITLE_CHARS = 25
AGENT_CHARS = 36


@dataclass(frozen=True, slots=True)
class Box:
    number: int
    task_id: int
    title: str  # the task's name, shortened to fit (``full_title`` has it all)
    full_title: str
    agent: str
    x: int
    y: int
    steps: int | None = None  # the plan's steps for this task, when a plan is shown
    status: str = ""  # a run's status of the task, when a run is shown
    done: int | None = None  # a run's steps done of ``steps``
    height: int = BOX_HEIGHT

    @property
    def mid_x(self) -> int:
        return self.x + BOX_WIDTH // 2

    @property
    def bottom(self) -> int:
        return self.y + self.height


@dataclass(frozen=True, slots=True)
class Link:
    """A context link: the later task reads the earlier one's output."""

    source: int  # task numbers (1-based)
    target: int
    path: str  # SVG path data


@dataclass(slots=True)
class Diagram:
    boxes: list[Box] = field(default_factory=list)
    arrows: list[str] = field(default_factory=list)  # the order, top to bottom: SVG path data
    links: list[Link] = field(default_factory=list)
    manager: str | None = None  # the manager's label (hierarchical crews)
    manager_lines: list[str] = field(default_factory=list)
    width: int = WIDTH
    height: int = 0
    box_height: int = BOX_HEIGHT

    @property
    def box_width(self) -> int:
        return BOX_WIDTH

    @property
    def manager_height(self) -> int:
        return MANAGER_HEIGHT

    @property
    def manager_width(self) -> int:
        return BOX_WIDTH + (INDENT if self.manager else 0)

    @property
    def margin(self) -> int:
        return MARGIN


def manager_label(crew: Any) -> str | None:
    """What the diagram calls a hierarchical crew's manager (None: the crew has none)."""
    if crew.process != "hierarchical":
        return None
    return manager_of(crew.process, crew.manager_llm.name if crew.manager_llm_id else None)


def manager_of(process: str | None, llm_name: str | None) -> str | None:
    """``manager_label`` from what a crew, or a run's snapshot of one, says: its process and its
    manager LLM's name (None: the site default). Lazy, as a socket's run view is built before it
    knows its reader's language."""
    from django.utils.translation import gettext_lazy

    if process != "hierarchical":
        return None
    return llm_name or gettext_lazy("the site default LLM")


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def crew_diagram(tasks: Iterable[Any], *, manager: str | None = None,
                 steps: Mapping[int, int] | None = None, statuses: Mapping[int, str] | None = None,
                 done: Mapping[int, int] | None = None,
                 context: Mapping[int, Iterable[int]] | None = None) -> Diagram:
    """The diagram of ``tasks`` (models or rows with ``pk``, ``name``, ``agent``: a model or its
    name), in order.

    ``context`` maps a task id to the ids it reads (default: each task's prefetched
    ``context``); ``steps`` (by task id) adds a plan's step counts to the boxes; ``statuses``
    draws a run: each box gets a line with the task's status and its ``done`` steps of
    ``steps``. ``manager`` draws a hierarchical crew's manager above them.
    """
    tasks = list(tasks)
    steps, statuses, done = steps or {}, statuses or {}, done or {}
    if context is None:
        context = {t.pk: [c.pk for c in t.context.all()] for t in tasks}
    number = {t.pk: n for n, t in enumerate(tasks, start=1)}
    height = BOX_HEIGHT + (STATUS_LINE if statuses else 0)
    diagram = Diagram(manager=manager, box_height=height)
    top = MARGIN + (MANAGER_HEIGHT + GAP if manager else 0)
    indent = INDENT if manager else 0  # the manager's lines run down the left gutter
    for n, task in enumerate(tasks, start=1):
        agent = getattr(task, "agent", None)
        agent_name = agent if isinstance(agent, str) or agent is None else agent.name
        # A plan's step count shares the title's line ("12 steps"); a run's has a line of its own.
        room = 7 if task.pk in steps and not statuses else 0
        diagram.boxes.append(Box(
            number=n, task_id=task.pk, full_title=task.name, title=_short(task.name, TITLE_CHARS - room),
            agent=_short(agent_name, AGENT_CHARS) if agent_name else "",
            x=MARGIN + indent, y=top + (n - 1) * (height + GAP), steps=steps.get(task.pk),
            status=statuses.get(task.pk, ""), done=done.get(task.pk), height=height,
        ))
    boxes = diagram.boxes
    for above, below in zip(boxes, boxes[1:], strict=False):
        diagram.arrows.append(f"M{above.mid_x} {above.bottom} V{below.y - 2}")
    # Context links that skip at least one task: a curve on the right, one lane each.
    right = MARGIN + indent + BOX_WIDTH
    lane = 0
    for task in tasks:
        for source_id in sorted(context.get(task.pk, ()), key=lambda pk: number.get(pk, 0)):
            if source_id not in number or number[source_id] >= number[task.pk] - 1:
                continue  # adjacent: the order's own arrow already shows it
            source, target = boxes[number[source_id] - 1], boxes[number[task.pk] - 1]
            lane += 1
            out = right + LANE * lane
            y1, y2 = source.y + height // 2, target.y + height // 2
            diagram.links.append(Link(source.number, target.number,
                                      f"M{right} {y1} C{out} {y1} {out} {y1} {out} {y1 + 12} "
                                      f"V{y2 - 12} C{out} {y2} {out} {y2} {right + 2} {y2}"))
    if manager:
        trunk = MARGIN + indent // 2
        for box in boxes:
            diagram.manager_lines.append(f"M{trunk} {MARGIN + MANAGER_HEIGHT} V{box.y + height // 2} H{box.x - 2}")
    diagram.width = max(WIDTH, right + LANE * (lane + 1) + MARGIN)
    diagram.height = (boxes[-1].bottom if boxes else top) + MARGIN
    return diagram
