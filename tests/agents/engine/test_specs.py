"""Planning configuration defaults and validation (ENGINE.md §2, upstream test_agent_reasoning)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agents.engine.specs import PlanningConfigSpec
from tests.agents.engine.helpers import make_agent, make_llm


def test_planning_config_defaults_match_the_spec() -> None:
    config = PlanningConfigSpec()

    assert config.reasoning_effort == "medium"
    assert config.observe_steps is None
    assert config.max_attempts is None
    assert config.max_steps == 20
    assert config.max_replans == 3
    assert config.max_step_iterations == 15
    assert config.step_timeout is None
    assert config.llm is None
    assert (config.system_prompt, config.plan_prompt, config.refine_prompt) == (None, None, None)


def test_max_attempts_none_still_stops_at_ten() -> None:
    assert PlanningConfigSpec().max_attempts_effective == 10
    assert PlanningConfigSpec(max_attempts=3).max_attempts_effective == 3


def test_custom_values_are_kept_as_given() -> None:
    llm = make_llm(key="planner", model="test/planner")
    config = PlanningConfigSpec(
        reasoning_effort="high",
        observe_steps=False,
        max_attempts=4,
        max_steps=5,
        max_replans=0,
        max_step_iterations=2,
        step_timeout=1.5,
        llm=llm,
        system_prompt="Plan {like} a pro",
        plan_prompt="Do {description} as {role}",
        refine_prompt="Fix {current_plan}",
    )

    assert config.reasoning_effort == "high"
    assert config.max_replans == 0
    assert config.step_timeout == 1.5
    assert config.llm == llm
    # The system prompt is used verbatim, so its braces are never checked as placeholders.
    assert config.system_prompt == "Plan {like} a pro"


def test_an_unknown_reasoning_effort_is_rejected() -> None:
    with pytest.raises(ValidationError, match="reasoning_effort"):
        PlanningConfigSpec(reasoning_effort="ultra")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_steps", 0),
        ("max_attempts", 0),
        ("max_replans", -1),
        ("max_step_iterations", 0),
        ("step_timeout", 0),
    ],
)
def test_out_of_range_numbers_are_rejected(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        PlanningConfigSpec(**{field: value})


def test_planning_true_means_low_effort_and_one_attempt() -> None:
    config = make_agent(planning=True).effective_planning

    assert config is not None
    assert config.reasoning_effort == "low"
    assert config.max_attempts == 1
    assert config.max_steps == 20
    assert config.max_replans == 3
    assert config.max_step_iterations == 15
    assert config.step_timeout is None
    assert config.llm_observes is False


def test_an_explicit_config_wins_over_the_planning_shortcut() -> None:
    explicit = PlanningConfigSpec(reasoning_effort="high", max_attempts=3)

    assert make_agent(planning=True, planning_config=explicit).effective_planning == explicit
    # planning=False does not switch off a config that is present (as upstream).
    assert make_agent(planning=False, planning_config=explicit).effective_planning == explicit


def test_no_planning_without_the_flag_or_a_config() -> None:
    assert make_agent().effective_planning is None


@pytest.mark.parametrize(
    ("effort", "observe_steps", "expected"),
    [
        ("low", None, False),
        ("medium", None, True),
        ("high", None, True),
        ("low", True, True),
        ("medium", False, False),
        ("high", False, False),
    ],
)
def test_observe_steps_overrides_the_effort_default(
    effort: str, observe_steps: bool | None, expected: bool
) -> None:
    config = PlanningConfigSpec(reasoning_effort=effort, observe_steps=observe_steps)  # type: ignore[arg-type]

    assert config.llm_observes is expected


def test_plan_prompt_rejects_an_unknown_placeholder_and_names_it() -> None:
    with pytest.raises(ValidationError) as info:
        PlanningConfigSpec(plan_prompt="Do {description} by {deadline}")

    message = str(info.value)
    assert "plan_prompt" in message
    assert "{deadline}" in message


def test_refine_prompt_rejects_placeholders_only_the_plan_prompt_offers() -> None:
    # {description} is allowed in plan_prompt but not in refine_prompt (as upstream).
    PlanningConfigSpec(
        plan_prompt="{role} {goal} {backstory} {description} {expected_output} {tools} {max_steps}"
    )
    with pytest.raises(ValidationError) as info:
        PlanningConfigSpec(refine_prompt="Refine {current_plan} for {description}")

    message = str(info.value)
    assert "refine_prompt" in message
    assert "{description}" in message


def test_literal_braces_are_written_doubled() -> None:
    config = PlanningConfigSpec(plan_prompt='Answer like {{"steps": []}} for {description}')

    assert config.plan_prompt is not None
    with pytest.raises(ValidationError, match="unbalanced brace"):
        PlanningConfigSpec(plan_prompt='Answer like {"steps": []}')
