"""The offline demo model (ENGINE.md §7): deterministic answers for every purpose, no network.

``DemoGateway`` implements the Gateway Protocol, so a fresh install can plan and run a crew end to
end without a key, and tests that do not need a scripted LLM get stable answers. It reads
``request.purpose`` and the messages (the engine's own prompt layouts from
``agents.engine.prompts``) and answers in the shape each caller expects.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

from agents.engine import demo_reading as read
from agents.engine.llm import DeltaCallback, LLMRequest, LLMResponse, Message, ToolCall

__all__ = ["DEMO_MODEL", "DemoGateway", "Pace", "demo_answer"]

DEMO_MODEL = "demo/offline"
DEMO_NOTE = (
    "This answer comes from the offline demo model, which shapes a templated answer from the task "
    "instead of doing it; choose a real LLM to get real work done."
)
_WORDS_PER_DELTA = 3

_TASK_HEADER = re.compile(r"^#{1,6}[ \t]*Task[ \t]+(\d+)[ \t]*[:.)-]?[ \t]*(.*)$", re.M | re.I)
_PLAIN_TASK_HEADER = re.compile(r"^Task[ \t]+(\d+)[ \t]*:[ \t]*(.*)$", re.M | re.I)
_FIELD = re.compile(r"^([A-Za-z][A-Za-z _'-]{0,30}?)[ \t]*:[ \t]*(.*)$")
# Field names the crew planner's task blocks use; any other "Word: text" line is description.
_KNOWN_FIELDS = frozenset(
    {
        "description", "expected output", "expected_output", "agent", "agent role", "role",
        "agent goal", "goal", "backstory", "agent backstory", "tools", "context",
        "context tasks", "receives", "inputs",
    }
)  # fmt: skip
_TOOL_NAME = re.compile(r"[A-Za-z_][\w-]*")


@dataclass(slots=True)
class DemoAnswer:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Pace:
    """How a hosted model feels: a wait before the first token, then tokens at a steady rate.

    Zero for both answers at once (tests). An LLM's params ``first_token_seconds`` and
    ``tokens_per_second`` override the gateway's pace for that LLM.
    """

    first_token_seconds: float = 0.0
    tokens_per_second: float = 0.0

    def for_llm(self, params: dict[str, Any]) -> Pace:
        first = _number(params.get("first_token_seconds"), self.first_token_seconds)
        rate = _number(params.get("tokens_per_second"), self.tokens_per_second)
        return Pace(first, rate)

    def seconds_for(self, text: str) -> float:
        return len(text) / 4 / self.tokens_per_second if self.tokens_per_second > 0 else 0.0


def _number(value: Any, default: float) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 3600:
        return float(value)
    return default


class DemoGateway:
    """The ``demo/offline`` model: no network, no key, the same answer for the same request,
    paced like a hosted model when ``pace`` says so (its sleeps end at once on a stop: the
    engine cancels the call)."""

    def __init__(self, pace: Pace | None = None) -> None:
        self.pace = pace or Pace()

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaCallback | None = None
    ) -> LLMResponse:
        answer = demo_answer(request)
        pace = self.pace.for_llm(request.llm.params)
        if pace.first_token_seconds:
            await asyncio.sleep(pace.first_token_seconds)
        streamed = request.stream and on_delta is not None
        if answer.content and (streamed or pace.tokens_per_second):
            pieces = read.word_chunks(answer.content, _WORDS_PER_DELTA) if streamed else [answer.content]
            for piece in pieces:
                if pace.tokens_per_second:
                    await asyncio.sleep(pace.seconds_for(piece))
                if streamed:
                    assert on_delta is not None
                    await on_delta(piece)
        if answer.tool_calls and pace.tokens_per_second:
            await asyncio.sleep(pace.seconds_for("".join(c.arguments for c in answer.tool_calls)))
        prompt_chars = sum(read.message_chars(m) for m in request.messages)
        answer_chars = len(answer.content) + sum(len(c.arguments) for c in answer.tool_calls)
        return LLMResponse(
            content=answer.content,
            tool_calls=answer.tool_calls,
            prompt_tokens=max(1, prompt_chars // 4),
            completion_tokens=max(1, answer_chars // 4),
            cost_usd=0.0,
            latency_ms=0,
            finish_reason="tool_calls" if answer.tool_calls else "stop",
            model="demo",
        )


def demo_answer(request: LLMRequest) -> DemoAnswer:
    """What the demo model says to ``request`` (pure: no I/O, no randomness)."""
    purpose = request.purpose
    if purpose == "crew_plan":
        return _crew_plan(request)
    if purpose in ("agent_plan", "refine", "replan"):
        return _agent_plan(request)
    if purpose == "observe":
        return _json_answer(request, _observation(request))
    if purpose == "plan_execute_plan":
        return DemoAnswer(content=json.dumps(_plan_execute_steps(request)))
    if request.response_schema is not None:
        return _json_answer(request, _fill_schema(request.response_schema, read.task(request)[0]))
    if purpose in ("synthesis", "aggregate"):
        return DemoAnswer(content=_synthesis(request))
    return _react(request)


# -- crew planning -------------------------------------------------------------------------


@dataclass(slots=True)
class _TaskBlock:
    number: int
    name: str
    fields: dict[str, str]

    def get(self, *names: str) -> str:
        for name in names:
            if self.fields.get(name):
                return self.fields[name]
        return ""


def _crew_plan(request: LLMRequest) -> DemoAnswer:
    text = read.user_text(request.messages)
    blocks = _task_blocks(text) or [_TaskBlock(1, "", {"description": read.clip(text)})]
    plans = [{"task_number": b.number, "steps": _crew_plan_steps(b)} for b in blocks]
    return _json_answer(request, {"plans": plans})


def _task_blocks(text: str) -> list[_TaskBlock]:
    headers = list(_TASK_HEADER.finditer(text)) or list(_PLAIN_TASK_HEADER.finditer(text))
    blocks: list[_TaskBlock] = []
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        body = text[header.end() : end]
        blocks.append(_TaskBlock(int(header.group(1)), header.group(2).strip(), _fields(body)))
    return blocks


def _fields(body: str) -> dict[str, str]:
    """``Key: value`` lines (lower-cased keys).

    Lines without a key continue the last value until a blank line, so the prompt's own text
    after the last task block is not read as part of that task.
    """
    fields: dict[str, list[str]] = {}
    current: str | None = None
    for line in body.splitlines():
        match = _FIELD.match(line)
        if match and match.group(1).strip().lower() in _KNOWN_FIELDS:
            current = match.group(1).strip().lower()
            fields.setdefault(current, []).append(match.group(2).strip())
        elif not line.strip():
            current = None
        elif current is not None:
            fields[current].append(line.strip())
    return {key: "\n".join(v for v in values if v) for key, values in fields.items()}


def _tool_names(text: str) -> list[str]:
    """Tool names from "calculator, web_search" or "- calculator: does sums" style text."""
    if not text or text.strip().lower().rstrip(".") in ("none", "no tools", "-", "n/a"):
        return []
    names: list[str] = []
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    listed = [line.lstrip("-* ").strip() for line in lines if line.startswith(("-", "*"))]
    for item in listed or ",".join(lines).split(","):
        head = re.split(r"[:(]", item, maxsplit=1)[0].strip().strip("`'\"")
        match = _TOOL_NAME.fullmatch(head)
        if match and head.lower() not in ("none", "tools") and head not in names:
            names.append(head)
    return names


def _crew_plan_steps(block: _TaskBlock) -> list[str]:
    label = f'"{block.name}"' if block.name else f"task {block.number}"
    description = block.get("description") or block.name or f"task {block.number}"
    expected = block.get("expected output", "expected_output") or "the result the task asks for"
    tools = _tool_names(block.get("tools"))
    context = block.get("context")
    sentences = read.sentences(description)

    optional: list[str] = []
    if context and context.strip().lower() not in ("none", "-"):
        optional.append(f"Start from the results it receives: {read.clip(context, 100)}")
    for tool in tools[:2]:
        expression = read.expression(description) if tool == "calculator" else None
        if expression:
            optional.append(f"Use the calculator tool to compute {expression}")
        else:
            optional.append(f"Use the {tool} tool where {label} needs it")
    if len(sentences) > 1:
        parts = "; ".join(read.clip(s, 70) for s in sentences[:3])
        optional.append(f"Cover each part of the brief in turn: {parts}")

    return [
        f"Read {label} and list what it asks for: {read.clip(description, 120)}",
        *optional[:2],
        f"Write the deliverable: {read.clip(expected, 120)}",
        "Check the deliverable against the expected output and fix any gap before handing it over",
    ]


# -- agent planning ------------------------------------------------------------------------


def _agent_plan(request: LLMRequest) -> DemoAnswer:
    task, expected = read.task(request)
    available = read.section(read.user_text(request.messages), "Available tools")
    offered = [n for n in read.function_names(request.tools) if n != "create_plan"]
    tools = _tool_names(available) + offered
    expression = read.expression(task)

    steps: list[dict[str, Any]] = []
    if expression and "calculator" in tools:
        steps.append(
            _plan_step(1, f"Calculate {expression} with the calculator tool", "calculator")
        )
    steps.append(_plan_step(len(steps) + 1, f"Work out what the task needs: {read.clip(task, 120)}"))
    sentences = read.sentences(task)
    if len(sentences) > 1:
        parts = "; ".join(read.clip(s, 60) for s in sentences[:3])
        steps.append(_plan_step(len(steps) + 1, f"Cover each part of the task: {parts}"))
    final = f"Write the final answer as the expected output asks: {read.clip(expected, 120)}"
    steps.append(_plan_step(len(steps) + 1, final, depends_on=[s["number"] for s in steps]))

    plan = {
        "plan": f"Offline demo plan in {len(steps)} steps for: {read.clip(task, 100)}",
        "steps": steps,
        "ready": True,
    }
    if "create_plan" in read.function_names(request.tools):
        return DemoAnswer(tool_calls=[read.tool_call("create_plan", plan)])
    return DemoAnswer(content=json.dumps(plan, indent=2) + "\n\nREADY")


def _plan_step(
    number: int, description: str, tool: str | None = None, depends_on: list[int] | None = None
) -> dict[str, Any]:
    return {
        "number": number,
        "description": description,
        "tool": tool,
        "depends_on": depends_on or [],
    }


def _observation(request: LLMRequest) -> dict[str, Any]:
    result = read.section(read.user_text(request.messages), "Its result")
    learned = "The step finished"
    if result:
        learned += f" and produced: {read.clip(result, 100)}"
    return {
        "success": True,
        "learned": learned + " (offline demo model review).",
        "plan_valid": True,
        "refinements": [],
        "needs_replan": False,
        "replan_reason": "",
        "goal_achieved": False,
    }


def _plan_execute_steps(request: LLMRequest) -> list[dict[str, Any]]:
    task, expected = read.task(request)
    actions: list[str] = []
    expression = read.expression(task)
    if expression and "calculator" in read.function_names(request.tools) + _tool_names(
        read.section(read.all_text(request.messages), "Available tools")
    ):
        actions.append(f"Calculate {expression} with the calculator tool")
    actions.append(f"Work out what the task needs: {read.clip(task, 120)}")
    actions.append(f"Write the final answer: {read.clip(expected, 120)}")
    return [{"step": n, "action": a} for n, a in enumerate(actions, start=1)]


# -- answering -----------------------------------------------------------------------------


def _react(request: LLMRequest) -> DemoAnswer:
    task, expected = read.task(request)
    result = read.tool_result(request.messages)
    framed = _wants_final_answer(request.messages)
    if result is None:
        call = _tool_to_call(request, task)
        if call is not None:
            return call
    text = read.user_text(request.messages)
    if _is_step(text) and not _is_last_step(text):
        about = re.search(r"\babout ([^.,;:\n]{2,60})", f"{expected}\n{text}")
        subject = about.group(1).strip() if about else "the task"
        answer = (
            f"Done: {read.clip(task, 200).rstrip('.')}.\n\nWhat this step found for {subject}: the points "
            f"that matter most, the open questions a later step should settle, and what the final "
            f"answer needs from here."
        )
        if result is not None:
            answer += f" The tool returned: {read.clip(result, 200)}."
        answer += "\n\n(Offline demo model: a real LLM would do this step's work here.)"
    else:
        answer = _deliverable(read.section(text, "Overall task") or task, expected, text)
        if result is not None:
            answer += f"\n\nThe tool returned: {read.clip(result, 200)}."
        answer += "\n\n" + DEMO_NOTE
    if not framed:
        return DemoAnswer(content=answer)
    gap = "\n" if answer.startswith(("-", "|", "#")) else " "  # a list or a table starts a line
    return DemoAnswer(content=f"Thought: I now know the final answer\nFinal Answer:{gap}{answer}")


def _tool_to_call(request: LLMRequest, task: str) -> DemoAnswer | None:
    """The one tool call the demo makes before answering: the calculator for a sum in the task,
    else a catalogue tool without required arguments that the task or step names."""
    expression = read.expression(task)
    calculator = read.calculator(request.tools)
    if expression and calculator is not None:
        name, argument = calculator
        return DemoAnswer(
            content="Thought: I will compute this with the calculator.",
            tool_calls=[read.tool_call(name, {argument: expression})],
        )
    if expression and not request.tools and read.text_protocol_offers(request.messages, "calculator"):
        action_input = json.dumps({"expression": expression})
        return DemoAnswer(
            content="Thought: I will compute this with the calculator.\n"
            f"Action: calculator\nAction Input: {action_input}"
        )
    for tool in request.tools or []:
        function = tool.get("function") or {}
        name = function.get("name")
        required = (function.get("parameters") or {}).get("required") or []
        if isinstance(name, str) and name != "calculator" and not required and name in task:
            return DemoAnswer(content=f"Thought: I will use the {name} tool.", tool_calls=[read.tool_call(name, {})])
    return None


def _wants_final_answer(messages: list[Message]) -> bool:
    """Whether the prompt asks for the ReAct format (an agent without tools is asked for the
    answer alone)."""
    return "Final Answer:" in read.user_text(messages)


def _is_step(text: str) -> bool:
    return bool(re.search(r"(?m)^##[ \t]*Your current step", text))


def _is_last_step(text: str) -> bool:
    return "This is the last step of the plan" in text


_ASPECTS = (
    "what {s} is and why it matters now",
    "the main approaches to {s} and how they differ",
    "who leads in {s} and what they have shipped",
    "what {s} costs and what drives the cost",
    "the risks and open problems of {s}",
    "how people use {s} day to day",
    "the recent milestones in {s}{year}",
    "what to measure when comparing options in {s}",
    "the rules and policies that shape {s}",
    "what to watch next in {s}",
)
_COUNT = re.compile(r"\b(\d{1,2}|three|four|five|six|seven|eight|nine|ten)\s+(?:bullet|point|item|idea|tip|step)", re.I)
_NUMBER_WORDS = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def _deliverable(task: str, expected: str, text: str) -> str:
    """A templated but specific answer shaped by the expected output: a list of as many points
    as it asks for, a report with a section per point of the context it received, or a table."""
    subject = _subject(task, expected) or _subject(_received_text(text), "") or "the task"
    year = read.find(r"current year is[ \t]*(\d{4})", text)
    lowered = expected.lower()
    points = [
        aspect.format(s=subject, year=f" ({year})" if year else "") for aspect in _ASPECTS
    ]
    if "table" in lowered:
        rows = "\n".join(f"| {n} | {p[0].upper() + p[1:]} | to be checked with a real model |"
                         for n, p in enumerate(points[:5], start=1))
        return f"| # | Topic | Finding |\n|---|---|---|\n{rows}"
    if any(word in lowered for word in ("report", "section")):
        received = _received_points(text) or points[:5]
        sections = "\n\n".join(
            f"## {read.clip(point, 90)}\n\nThis section expands on {read.clip(point, 90).rstrip('.')}, "
            f"as it bears on {subject}: what is known, what it means for the reader, and what to do next."
            for point in received[:10]
        )
        title = f"{subject[0].upper() + subject[1:]}: a report" if subject != "the task" else "Report"
        return f"# {title}\n\n{sections}"
    if any(word in lowered for word in ("list", "bullet", "points")):
        count = _count(expected)
        return "\n".join(f"- {p[0].upper() + p[1:]}." for p in (points * 2)[:count])
    return f'Offline demo answer for the task "{read.clip(task)}". Expected output: {read.clip(expected).rstrip(".")}.'


def _subject(task: str, expected: str) -> str:
    """What the task is about ("research about AI LLMs"), or "" when it does not say."""
    for source in (expected, task):
        found = re.search(r"\babout ([^.,;:\n]{2,60})", source)
        if found:
            return found.group(1).strip().rstrip(".")
    return ""


def _count(expected: str) -> int:
    match = _COUNT.search(expected)
    if not match:
        return 5
    word = match.group(1).lower()
    return max(1, min(10, int(word) if word.isdigit() else _NUMBER_WORDS[word]))


def _received_text(text: str) -> str:
    """The context a task received from earlier tasks, as the engine's prompts lay it out."""
    return read.find(r"(?m)^(?:##[ \t]*)?(?:Context|This is the context you're working with)[^\n]*\n(.*?)(?=\n##[ \t]|\Z)", text)


def _received_points(text: str) -> list[str]:
    """The bullet points of the context a task received (an earlier task's list)."""
    context = _received_text(text)
    return [m.group(1).strip().rstrip(".") for m in re.finditer(r"(?m)^[ \t]*[-*][ \t]+(.+)$", context or text)][:10]


def _synthesis(request: LLMRequest) -> str:
    """One merged answer: the caller asked for the answer only, so no ReAct framing."""
    task, expected = read.task(request)
    text = read.user_text(request.messages)
    results = read.section(text, "Step results") or read.section(text, "Step outputs")
    # The synthesis prompt closes with its instruction; it is not part of the results.
    results = re.split(r"\n\s*\n(?=Write the final answer)", results, maxsplit=1)[0]
    answer = f'Offline demo answer for the task "{read.clip(task)}". Expected output: {read.clip(expected)}'
    answer = answer.rstrip(".") + "."
    if results:
        answer += f"\n\n{results.strip()}\n\n"
    else:
        answer += " "
    return answer + DEMO_NOTE


def _json_answer(request: LLMRequest, value: Any) -> DemoAnswer:
    """JSON as text, or as the arguments of the one function the caller offered or forced."""
    forced = read.forced_function(request)
    if forced is not None:
        return DemoAnswer(tool_calls=[read.tool_call(forced, value)])
    return DemoAnswer(content=json.dumps(value))


def _fill_schema(schema: dict[str, Any], text: str, depth: int = 0) -> Any:
    """A value that satisfies a simple JSON schema: the demo's structured answer."""
    defs = schema.get("$defs") or schema.get("definitions") or {}
    return _fill(schema, text, defs, depth)


def _fill(schema: Any, text: str, defs: dict[str, Any], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > 6:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs:
        return _fill(defs[ref.rsplit("/", 1)[-1]], text, defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return _fill(schema[key][0], text, defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: _fill(sub, text, defs, depth + 1) for name, sub in props.items()}
    if kind == "array":
        return [_fill(schema.get("items") or {"type": "string"}, text, defs, depth + 1)]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return f"Offline demo value for: {read.clip(text, 80)}"
