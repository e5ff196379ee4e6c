"""A run as people read it: its stored events folded once into tasks, plans, steps, tools and LLM calls.

- ``fold``: ``RunView``, the run's state after its events (building, reading, ``apply``), and the
  run's own events; ``fold_tasks``: the events inside its tasks; ``fold_progress``: the crew's
  diagram with each task's status, and what the run waits for.
- ``state``: the parts of a run (``TaskView``, ``Step``, ``LLMCall``…), plain dataclasses.
- ``render``: the socket's message for an event (``render_event_html``); the markup itself is in
  ``templates/crews/run_parts.jinja`` (the hot fragments, Jinja2 macros) and
  ``templates/crews/run_detail.html`` (the page and its other partials).
- ``text``: words and figures: sanitised markdown, labels per language, durations, ids, URLs.

LLM output is untrusted: it is escaped by the templates, and markdown goes through ``markdown``
(markdown-it, then the nh3 sanitiser) before it is marked safe.
"""

from crews.run_view.fold import RunView, fold_events, run_duration
from crews.run_view.fold_tasks import crew_plan_steps, plan_key
from crews.run_view.render import render_event_html
from crews.run_view.state import (
    Approval,
    Change,
    Deviation,
    Feedback,
    LLMCall,
    LogRow,
    Note,
    PlanSegment,
    Rejected,
    Step,
    TaskView,
    ToolCall,
    parts,
)
from crews.run_view.text import (
    ACTIVE,
    FINISHED,
    RUN_SCOPE,
    RUN_STATUS_TONE,
    STEP_STATUS_TONE,
    TASK_STATUS_TONE,
    _markdown_html,
    delta_target,
    dom_key,
    duration_text,
    llm_call_url,
    markdown,
    run_status_label,
    step_result_url,
    tokens_text,
)

__all__ = [
    "ACTIVE", "FINISHED", "RUN_SCOPE", "RUN_STATUS_TONE", "STEP_STATUS_TONE", "TASK_STATUS_TONE",
    "Approval", "Change", "Deviation", "Feedback", "LLMCall", "LogRow", "Note", "PlanSegment", "Rejected", "RunView",
    "Step", "TaskView", "ToolCall", "_markdown_html", "crew_plan_steps", "delta_target", "dom_key",
    "duration_text", "fold_events", "llm_call_url", "markdown", "parts", "plan_key", "render_event_html",
    "run_duration", "run_status_label", "step_result_url", "tokens_text",
]
