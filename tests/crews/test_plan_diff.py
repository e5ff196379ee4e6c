"""The plan diff (crews/plan_diff.py): each step difference reads as one word, "added",
"removed", "changed" or "moved", and a step that kept its text but changed place is a move, not a
removal and an addition. Plain functions, no database."""

from __future__ import annotations

from typing import Any

from crews.plan_diff import diff_versions


def rows(diff: Any, task_id: int = 1) -> list[tuple[int, str, bool, bool]]:
    task = next(t for t in diff.tasks if t.task_id == task_id)
    return [(s.uid, s.status, s.changed, s.moved) for s in task.steps]


def test_diff_finds_added_removed_and_changed_steps_by_id() -> None:
    old = {1: [(1, "a", False), (2, "b", False), (3, "c", False)]}
    new = {1: [(1, "a", False), (3, "C!", False), (4, "d", False)]}

    diff = diff_versions(old, new, [1])

    assert rows(diff) == [(1, "kept", False, False), (2, "removed", False, False),
                          (3, "kept", True, False), (4, "added", False, False)]
    assert diff.counts == {"added": 1, "removed": 1, "changed": 1, "moved": 0}
    changed = diff.tasks[0].steps[2]
    assert (changed.old_text, changed.text, changed.number) == ("c", "C!", 2)


def test_diff_marks_only_the_steps_that_really_moved() -> None:
    old = {1: [(1, "a", False), (2, "b", False), (3, "c", False), (4, "d", False)]}
    new = {1: [(2, "b", False), (3, "c", False), (4, "d", False), (1, "a", False)]}

    diff = diff_versions(old, new, [1])

    assert [uid for uid, _s, _c, moved in rows(diff) if moved] == [1]
    assert diff.counts["moved"] == 1


def test_deleting_the_first_step_does_not_make_the_others_moved() -> None:
    old = {1: [(1, "a", False), (2, "b", False), (3, "c", False)]}
    new = {1: [(2, "b", False), (3, "c", False)]}

    diff = diff_versions(old, new, [1])

    assert rows(diff) == [(1, "removed", False, False), (2, "kept", False, False), (3, "kept", False, False)]
    assert diff.counts == {"added": 0, "removed": 1, "changed": 0, "moved": 0}


def test_a_step_that_changed_task_is_moved_and_pin_changes_are_noted() -> None:
    old = {1: [(1, "a", False), (2, "b", False)], 2: [(3, "c", False)]}
    new = {1: [(1, "a", True)], 2: [(3, "c", False), (2, "b", False)]}

    diff = diff_versions(old, new, [1, 2])

    assert rows(diff, 1) == [(1, "kept", False, False)]
    assert diff.tasks[0].steps[0].pin_changed and diff.tasks[0].has_changes
    assert rows(diff, 2) == [(3, "kept", False, False), (2, "kept", False, True)]
    # A pin is part of the step: flipping it reads "changed".
    assert [s.kind for s in diff.tasks[0].steps] == ["changed"] and diff.tasks[1].steps[1].kind == "moved"
    assert diff.counts == {"added": 0, "removed": 0, "changed": 1, "moved": 1}


def test_identical_versions_have_no_changes() -> None:
    same = {1: [(1, "a", False), (2, "b", True)]}

    diff = diff_versions(same, same, [1])

    assert not diff.has_changes and all(s.same for s in diff.tasks[0].steps)


def test_a_step_with_a_new_id_and_the_same_text_is_unchanged() -> None:
    # As after a regeneration that wrote steps 1 and 3 again (new ids) and replaced step 2.
    old = {1: [(1, "a", False), (2, "b", False), (3, "c", False)], 2: [(4, "d", False)]}
    new = {1: [(5, "a", False), (6, "B!", False), (7, "c", False)], 2: [(8, "c", False)]}

    diff = diff_versions(old, new, [1, 2])

    assert rows(diff, 1) == [(5, "kept", False, False), (2, "removed", False, False), (6, "added", False, False),
                             (7, "kept", False, False)]
    assert [s.same for s in diff.tasks[0].steps] == [True, False, False, True]
    # "c" pairs with the step of its own task first; task 2's "c" is another step.
    assert rows(diff, 2) == [(4, "removed", False, False), (8, "added", False, False)]
    assert diff.counts == {"added": 2, "removed": 2, "changed": 0, "moved": 0}


def test_each_difference_reads_as_one_of_four_words() -> None:
    old = {1: [(1, "a", False), (2, "b", False), (3, "c", False), (4, "d", False)]}
    new = {1: [(2, "b", False), (1, "a", False), (3, "C!", False), (5, "e", False)]}

    diff = diff_versions(old, new, [1])

    kinds = {s.text: s.kind for s in diff.tasks[0].steps}
    assert kinds == {"b": "same", "a": "moved", "C!": "changed", "d": "removed", "e": "added"}
    assert diff.counts == {"added": 1, "removed": 1, "changed": 1, "moved": 1}


def test_a_step_that_changed_and_moved_reads_changed_and_still_says_it_moved() -> None:
    old = {1: [(1, "a", False), (2, "b", False), (3, "c", False)]}
    new = {1: [(2, "b", False), (3, "c", False), (1, "a!", False)]}

    step = next(s for s in diff_versions(old, new, [1]).tasks[0].steps if s.uid == 1)

    assert (step.kind, step.changed, step.moved, step.old_text) == ("changed", True, True, "a")


def test_the_same_text_in_another_place_is_a_move_not_a_removal_and_an_addition() -> None:
    # Written again with new ids (as a regeneration or an undo does): within the task, in a new order…
    old = {1: [(1, "a", False), (2, "b", False), (3, "c", False)]}
    new = {1: [(6, "c", False), (4, "a", False), (5, "b", False)]}

    diff = diff_versions(old, new, [1])

    assert [(s.text, s.kind) for s in diff.tasks[0].steps] == [("c", "moved"), ("a", "same"), ("b", "same")]
    assert diff.counts == {"added": 0, "removed": 0, "changed": 0, "moved": 1}


def test_a_step_written_again_under_another_task_is_moved_there() -> None:
    old = {1: [(1, "a", False), (2, "b", False)], 2: [(3, "c", False)]}
    new = {1: [(1, "a", False)], 2: [(3, "c", False), (9, "b", False)]}

    diff = diff_versions(old, new, [1, 2])

    assert rows(diff, 1) == [(1, "kept", False, False)]
    assert rows(diff, 2) == [(3, "kept", False, False), (9, "kept", False, True)]
    assert diff.tasks[1].steps[1].kind == "moved"
    assert diff.counts == {"added": 0, "removed": 0, "changed": 0, "moved": 1}


def test_a_same_text_pairs_once_so_a_duplicate_is_still_added() -> None:
    old = {1: [(1, "a", False), (2, "b", False)]}
    new = {1: [(3, "b", False), (4, "b", False), (1, "a", False)]}

    diff = diff_versions(old, new, [1])

    assert sorted(s.kind for s in diff.tasks[0].steps) == ["added", "moved", "same"]
    assert diff.counts == {"added": 1, "removed": 0, "changed": 0, "moved": 1}
