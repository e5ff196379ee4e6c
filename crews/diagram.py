"""A picture of a crew: its tasks in order, the agent on each, the context links between them and
(hierarchical) the manager, laid out here and drawn as SVG by ``templates/crews/_diagram.html``.

Only geometry lives here; the markup, the words and their translations are the template's. The
layout is one column (it reads the same at 360 px as at 1366 px): a box a task, an arrow down to
the next, and each context link that skips a task as a curve on the right, one lane a link so
curves never overlap. A hierarchical crew's manager stands above, with a line to every task.
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

    @property
    def mid_x(self) -> int:
        return self.x + BOX_WIDTH // 2

    @property
    def bottom(self) -> int:
        return self.y + BOX_HEIGHT


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

    @property
    def box_width(self) -> int:
        return BOX_WIDTH

    @property
    def box_height(self) -> int:
        return BOX_HEIGHT

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
    from django.utils.translation import gettext as _

    if crew.process != "hierarchical":
        return None
    return crew.manager_llm.name if crew.manager_llm_id else _("the site default LLM")


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def crew_diagram(tasks: Iterable[Any], *, manager: str | None = None,
                 steps: Mapping[int, int] | None = None, statuses: Mapping[int, str] | None = None,
                 context: Mapping[int, Iterable[int]] | None = None) -> Diagram:
    """The diagram of ``tasks`` (models or rows with ``pk``, ``name``, ``agent``), in order.

    ``context`` maps a task id to the ids it reads (default: each task's prefetched
    ``context``); ``steps`` and ``statuses`` (by task id) add a plan's step counts and a run's
    statuses to the boxes; ``manager`` draws a hierarchical crew's manager above them.
    """
    tasks = list(tasks)
    steps, statuses = steps or {}, statuses or {}
    if context is None:
        context = {t.pk: [c.pk for c in t.context.all()] for t in tasks}
    number = {t.pk: n for n, t in enumerate(tasks, start=1)}
    diagram = Diagram(manager=manager)
    top = MARGIN + (MANAGER_HEIGHT + GAP if manager else 0)
    indent = INDENT if manager else 0  # the manager's lines run down the left gutter
    for n, task in enumerate(tasks, start=1):
        agent = getattr(task, "agent", None)
        diagram.boxes.append(Box(
            number=n, task_id=task.pk, full_title=task.name,
            title=_short(task.name, TITLE_CHARS - (7 if task.pk in steps else 0)),  # room for "12 steps"
            agent=_short(agent.name, AGENT_CHARS) if agent is not None else "",
            x=MARGIN + indent, y=top + (n - 1) * (BOX_HEIGHT + GAP), steps=steps.get(task.pk),
            status=statuses.get(task.pk, ""),
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
            y1, y2 = source.y + BOX_HEIGHT // 2, target.y + BOX_HEIGHT // 2
            diagram.links.append(Link(source.number, target.number,
                                      f"M{right} {y1} C{out} {y1} {out} {y1} {out} {y1 + 12} "
                                      f"V{y2 - 12} C{out} {y2} {out} {y2} {right + 2} {y2}"))
    if manager:
        trunk = MARGIN + indent // 2
        for box in boxes:
            diagram.manager_lines.append(f"M{trunk} {MARGIN + MANAGER_HEIGHT} V{box.y + BOX_HEIGHT // 2} H{box.x - 2}")
    diagram.width = max(WIDTH, right + LANE * (lane + 1) + MARGIN)
    diagram.height = (boxes[-1].bottom if boxes else top) + MARGIN
    return diagram
