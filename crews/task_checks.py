"""What a task's answer must be (issue #18), checked when a task is saved: its output schema (a JSON
schema whose root is an object or an array) and its guardrails. Services, forms and the API all
validate through here, so a task that saved is one the engine can run."""

from __future__ import annotations

import json
from typing import Any

import referencing
import referencing.exceptions
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing.jsonschema import DRAFT202012

from agents.engine.output_json import subschemas
from agents.engine.patterns import compile_error, repeats_a_repetition

MAX_SCHEMA_CHARS = 20_000
MAX_ITEMS = 20  # criteria, must contain, must not contain: each
MAX_TEXT = 1_000  # one criterion or phrase
MAX_PATTERN = 500
SLOW_PATTERN = gettext_noop(
    "The pattern %(pattern)s repeats a repetition, like (a+)+, which can take very long to check; rewrite it."
)
GUARDRAIL_KEYS = ("criteria", "min_chars", "max_chars", "must_contain", "must_not_contain", "pattern")


def clean_output_schema(schema: Any) -> dict[str, Any] | None:
    """``schema`` checked against the Draft 2020-12 meta-schema; its root must be an object or an
    array (a table has rows). ``None`` or ``{}`` mean a free-text answer."""
    if schema is None or schema == {}:
        return None
    if not isinstance(schema, dict):
        raise ValidationError({"output_schema": _("The output schema must be a JSON object.")})
    try:
        too_long = len(json.dumps(schema, ensure_ascii=False, allow_nan=False)) > MAX_SCHEMA_CHARS
    except (TypeError, ValueError, RecursionError):  # not JSON: a date, NaN, endless nesting
        raise ValidationError({"output_schema": _("The output schema must be a JSON object.")}) from None
    if too_long:
        raise ValidationError({"output_schema": _("The output schema is too long.")})
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValidationError(
            {"output_schema": _("This is not a valid JSON schema: %(error)s") % {"error": exc.message}}
        ) from exc
    except RecursionError:  # deeper than the meta-schema check can follow
        raise ValidationError({"output_schema": _("The output schema is nested too deeply.")}) from None
    if schema.get("type") not in ("object", "array"):
        raise ValidationError(
            {"output_schema": _('The output schema must have "type": "object" or "type": "array" at its root.')}
        )
    _refuse_reaching_out(schema)
    return schema


def _refuse_reaching_out(schema: dict[str, Any]) -> None:
    """Refuse what would make a run reach out or stall: a ``$ref`` or ``$dynamicRef`` outside the
    schema (the engine never fetches one), a local one that does not resolve (every run would
    fail on it), ``patternProperties`` (jsonschema applies it with no time limit) and a ``pattern``
    the engine does not read or that repeats a repetition. Referenced parts are checked too."""
    def refuse(message: str) -> ValidationError:
        return ValidationError({"output_schema": message})

    resolver = referencing.Registry().resolver_with_root(DRAFT202012.create_resource(schema))
    walked: set[int] = set()
    roots: list[Any] = [schema]
    while roots:
        for node in subschemas(roots.pop()):
            walked.add(id(node))
            if isinstance(node.get("patternProperties"), dict):
                raise refuse(_("The output schema may not use patternProperties: name the properties instead."))
            pattern = node.get("pattern")
            if isinstance(pattern, str):
                error = compile_error(pattern)
                if error is not None:
                    raise refuse(_("The pattern %(pattern)s is not a valid regular expression: %(error)s")
                                 % {"pattern": pattern, "error": error})
                if repeats_a_repetition(pattern):
                    raise refuse(_(SLOW_PATTERN) % {"pattern": pattern})
            for key in ("$ref", "$dynamicRef"):
                ref = node.get(key)
                if not isinstance(ref, str):
                    continue
                if not ref.startswith("#"):
                    raise refuse(_("The output schema may only refer to its own parts (a reference starting "
                                   "with #), not to %(ref)s.") % {"ref": ref})
                try:
                    target = resolver.lookup(ref).contents
                except referencing.exceptions.Unresolvable as exc:
                    raise refuse(_("The output schema refers to %(ref)s, which it does not define.")
                                 % {"ref": ref}) from exc
                if id(target) not in walked:
                    roots.append(target)


def _texts(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.splitlines()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError({field: _("Give a list of texts.")})
    texts = [v.strip() for v in value if v.strip()]
    if len(texts) > MAX_ITEMS:
        raise ValidationError({field: _("Give at most %(n)s items.") % {"n": MAX_ITEMS}})
    if any(len(t) > MAX_TEXT for t in texts):
        raise ValidationError({field: _("Each item may have at most %(n)s characters.") % {"n": MAX_TEXT}})
    return texts


def _count(value: Any, field: str, least: int) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValidationError({field: _("Give a whole number of at least %(n)s.") % {"n": least}})
    return value


def clean_guardrails(checks: Any) -> dict[str, Any]:
    """The checks with empty ones left out, or ``ValidationError`` naming the first bad one.

    Keys: ``criteria`` (plain-language, judged by an LLM), ``min_chars``, ``max_chars``,
    ``must_contain``, ``must_not_contain`` (compared without regard to case) and ``pattern`` (a
    regular expression, searched)."""
    if checks is None:
        return {}
    if not isinstance(checks, dict):
        raise ValidationError({"guardrails": _("The checks must be a JSON object.")})
    unknown = sorted(set(checks) - set(GUARDRAIL_KEYS))
    if unknown:
        raise ValidationError({"guardrails": _("Unknown check: %(name)s.") % {"name": unknown[0]}})
    cleaned: dict[str, Any] = {}
    problems: dict[str, Any] = {}

    def take(field: str, check: Any) -> Any:
        try:
            return check()
        except ValidationError as exc:
            problems.update(exc.message_dict)
            return None

    for field in ("criteria", "must_contain", "must_not_contain"):
        texts = take(field, lambda field=field: _texts(checks.get(field), field))
        if texts:
            cleaned[field] = texts
    low = take("min_chars", lambda: _count(checks.get("min_chars"), "min_chars", 0))
    high = take("max_chars", lambda: _count(checks.get("max_chars"), "max_chars", 1))
    if low is not None and high is not None and low > high:
        problems["max_chars"] = [_("The most characters must not be fewer than the least.")]
    if low is not None:
        cleaned["min_chars"] = low
    if high is not None:
        cleaned["max_chars"] = high
    pattern = take("pattern", lambda: _pattern(checks.get("pattern")))
    if pattern:
        cleaned["pattern"] = pattern
    if problems:
        raise ValidationError(problems)
    return cleaned


def _pattern(pattern: Any) -> str | None:
    if pattern in (None, ""):
        return None
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN:
        raise ValidationError({"pattern": _("Give a regular expression of at most %(n)s characters.") % {"n": MAX_PATTERN}})
    error = compile_error(pattern)
    if error is not None:
        raise ValidationError({"pattern": _("This is not a valid regular expression: %(error)s") % {"error": error}})
    if repeats_a_repetition(pattern):
        raise ValidationError({"pattern": _(SLOW_PATTERN) % {"pattern": pattern}})
    return pattern


def clean_task_checks(task: Any) -> None:
    """Validate and normalise ``task.output_schema`` and ``task.guardrails`` in place."""
    task.output_schema = clean_output_schema(task.output_schema)
    task.guardrails = clean_guardrails(task.guardrails)
