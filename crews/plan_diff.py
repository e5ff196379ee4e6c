"""Differences between two versions of a plan, step by step: what the editor's comparison shows.

Steps are matched by their stable ids, then by text (never by position), and a move is reported
only for the steps off one longest run that kept its order. Each difference reads as one word:
added, removed, changed or moved (``StepChange.kind``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# One step as a version holds it: (stable id, text, pinned).
StepTuple = tuple[int, str, bool]


@dataclass(frozen=True)
class StepChange:
    """One step in a comparison: ``status`` is "added", "removed" or "kept"; a kept step may
    also have ``changed`` text, a ``moved`` place, or a flipped pin."""

    uid: int
    status: str
    text: str
    old_text: str = ""
    changed: bool = False
    moved: bool = False
    pin_changed: bool = False
    pinned: bool = False
    number: int | None = None  # its place in the newer version (None when removed)

    @property
    def same(self) -> bool:
        return self.status == "kept" and not (self.changed or self.moved or self.pin_changed)

    @property
    def kind(self) -> str:
        """The one word a person reads: "added", "removed", "changed" (its text or its pin),
        "moved" (only its place), or "same". A step both changed and moved is "changed"; its
        ``moved`` still says it moved too."""
        if self.status != "kept":
            return self.status
        if self.changed or self.pin_changed:
            return "changed"
        return "moved" if self.moved else "same"


@dataclass
class TaskDiff:
    task_id: int
    steps: list[StepChange]

    @property
    def has_changes(self) -> bool:
        return any(not s.same for s in self.steps)


@dataclass
class PlanDiff:
    tasks: list[TaskDiff]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def has_changes(self) -> bool:
        return any(self.counts.values())


def _longest_increasing(values: Sequence[int]) -> set[int]:
    """Indexes of one longest strictly increasing subsequence of ``values`` (n is small)."""
    if not values:
        return set()
    best = [1] * len(values)
    prev = [-1] * len(values)
    for i in range(len(values)):
        for j in range(i):
            if values[j] < values[i] and best[j] + 1 > best[i]:
                best[i], prev[i] = best[j] + 1, j
    i = max(range(len(values)), key=lambda k: best[k])
    keep = set()
    while i != -1:
        keep.add(i)
        i = prev[i]
    return keep


def _same_text_steps(
    old: Mapping[int, Sequence[StepTuple]],
    new: Mapping[int, Sequence[StepTuple]],
    old_where: Mapping[int, tuple[int, int, str, bool]],
    new_uids: set[int],
) -> dict[int, int]:
    """New step id -> old step id, for a step only in ``new`` with the same text as a step only in
    ``old``: first of its own task, then of another task (a step moved there, written again).
    Each old step pairs once, in order."""
    gone: dict[tuple[int, str], list[int]] = {}
    for task_id, steps in old.items():
        for uid, text, _pinned in steps:
            if uid not in new_uids:
                gone.setdefault((task_id, text), []).append(uid)
    fresh = [(task_id, uid, text) for task_id, steps in new.items() for uid, text, _pinned in steps
             if uid not in old_where]
    was: dict[int, int] = {}
    for task_id, uid, text in fresh:
        if same := gone.get((task_id, text)):
            was[uid] = same.pop(0)
    for _task_id, uid, text in fresh:
        if uid not in was and (same := next((ids for (_t, t), ids in gone.items() if t == text and ids), None)):
            was[uid] = same.pop(0)
    return was


def diff_versions(
    old: Mapping[int, Sequence[StepTuple]],
    new: Mapping[int, Sequence[StepTuple]],
    task_order: Sequence[int],
) -> PlanDiff:
    """Compare two versions step by step, by stable id, then by text (never by position).

    A step is *added* or *removed* when its id is in only one version, unless the other version
    has a step with the very same text and an id of its own (of the same task first, then of
    another): then the two are one step (as after a regeneration that wrote a step again), moved
    if it changed task. A kept step is *changed* when its text or its pin differs, *moved* when it
    left its task or its place among the steps both versions share
    changed: the fewest moves that explain the new order (the steps off one longest increasing
    run of old places), so deleting step 1 does not make every later step "moved".
    Removed steps are listed where they used to be, after the step that preceded them.
    """
    old_where = {uid: (task_id, i, text, pinned) for task_id, steps in old.items()
                 for i, (uid, text, pinned) in enumerate(steps)}
    new_uids = {uid for steps in new.values() for uid, _text, _pinned in steps}
    # A new id whose text an old id of the same task had, and that old id is gone: the same step.
    was = _same_text_steps(old, new, old_where, new_uids)
    new_uids |= set(was.values())
    order = list(task_order) + [t for t in {*old, *new} if t not in task_order]
    counts = {"added": 0, "removed": 0, "changed": 0, "moved": 0}
    tasks: list[TaskDiff] = []
    for task_id in order:
        new_steps = list(new.get(task_id, []))
        old_steps = list(old.get(task_id, []))
        keys = [was.get(uid, uid) for uid, _t, _p in new_steps]  # each new step's id in ``old``
        shared = [i for i, key in enumerate(keys) if key in old_where and old_where[key][0] == task_id]
        in_order = _longest_increasing([old_where[keys[i]][1] for i in shared])
        stayed = {keys[shared[k]] for k in in_order}
        rows: list[StepChange] = []
        for number, ((uid, text, pinned), key) in enumerate(zip(new_steps, keys, strict=True), start=1):
            before = old_where.get(key)
            if before is None:
                rows.append(StepChange(uid, "added", text, pinned=pinned, number=number))
                counts["added"] += 1
                continue
            moved = before[0] != task_id or key not in stayed
            changed = before[2] != text
            pin_changed = before[3] != pinned
            counts["moved"] += moved
            counts["changed"] += changed or pin_changed
            rows.append(StepChange(uid, "kept", text, old_text=before[2] if changed else "", changed=changed,
                                   moved=moved, pin_changed=pin_changed, pinned=pinned, number=number))
        # Removed steps go back where they were: after the nearest earlier step still listed.
        anchor: int | None = None
        inserts: dict[int | None, list[StepChange]] = {}
        listed = set(keys)
        for uid, text, pinned in old_steps:
            if uid in new_uids:
                if uid in listed:
                    anchor = uid
                continue
            inserts.setdefault(anchor, []).append(StepChange(uid, "removed", text, pinned=pinned))
            counts["removed"] += 1
        merged = list(inserts.get(None, []))
        for row, key in zip(rows, keys, strict=True):
            merged.append(row)
            merged.extend(inserts.get(key, []))
        if merged:
            tasks.append(TaskDiff(task_id, merged))
    return PlanDiff(tasks, counts)

