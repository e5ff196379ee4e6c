"""An LLM call as a person reads it back: what was sent and what came back, without secrets.

``call_record`` takes the request and reply as the caller sent and got them (``LLMCaller``, for a
sink that keeps calls); ``kept_call`` is what a sink stores of one: every string scrubbed of the
LLM keys it is given and of anything shaped like a key or a bearer token, and the whole capped
at ``MAX_CALL_CHARS`` by shortening the longest strings first (ENGINE.md §2b).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any

from agents.engine.events import LLMCallRecord
from agents.engine.llm import LLMRequest, LLMResponse

REDACTED = "[redacted]"
# A run page shows one call at a time; a call bigger than this (a huge tool output fed back, say)
# keeps the start of each of its longest strings.
MAX_CALL_CHARS = 200_000
MIN_SECRET_CHARS = 4  # shorter "secrets" would redact ordinary words

# In a conversation a token is 8 characters or more with a digit ("the bearer of news", "bearer
# instruments" are left alone); in an error message (``broad``), anything after "Bearer" is, as
# an echoed header would be.
_BEARER = re.compile(r"(?i)\b(bearer\s+)(?=[^\s'\",}]*\d)[^\s'\",}]{8,}")
_BEARER_BROAD = re.compile(r"(?i)\b(bearer\s+)[^\s'\",}]+")
_OPENAI_STYLE_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")


def scrub(text: str, secrets: Iterable[str] = (), *, broad: bool = False) -> str:
    """``text`` without ``secrets``, bearer tokens or anything shaped like an OpenAI key
    (``broad``: every word after "Bearer", for provider errors that echo headers)."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_CHARS and secret in text:
            text = text.replace(secret, REDACTED)
    # The substring tests first: a regex scan costs ~25 ns a character, a prompt is kilobytes.
    if "bearer" in text.lower():
        text = (_BEARER_BROAD if broad else _BEARER).sub(rf"\1{REDACTED}", text)
    if "sk-" in text:
        text = _OPENAI_STYLE_KEY.sub(f"sk-{REDACTED}", text)
    return text


def call_record(request: LLMRequest, response: LLMResponse | None = None, *, error: str = "") -> LLMCallRecord:
    """What ``request`` sent and got back (``response``, or the ``error`` it failed with)."""
    tools = [str((t.get("function") or {}).get("name") or t.get("name") or "") for t in request.tools or ()]
    schema = request.response_schema
    response_format = ""
    if schema is not None:
        response_format = str(schema.get("name") or schema.get("title") or request.purpose)
        if request.response_form == "json_object":
            response_format += " (json_object)"  # JSON mode: the schema went in the prompt
    reply = None
    if response is not None:
        reply = {
            "content": response.content,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls],
            "finish_reason": response.finish_reason,
        }
    return LLMCallRecord(
        messages=list(request.messages), tools=tools, response_format=response_format, reply=reply,
        error=error, api_key=request.llm.api_key,
    )


def kept_call(record: LLMCallRecord, *, secrets: Collection[str] = (),
              limit: int = MAX_CALL_CHARS) -> dict[str, Any]:
    """``record`` as plain JSON data, scrubbed of ``secrets`` (and its own LLM's key), at most
    about ``limit`` characters of text: ``{messages, tools, response_format, reply, error}``."""
    own = record.api_key.get_secret_value() if record.api_key is not None else ""
    # Longest first: a key that contains another is replaced whole.
    every = sorted({*secrets, own} - {""}, key=len, reverse=True)
    data = _plain({
        "messages": record.messages, "tools": record.tools, "response_format": record.response_format,
        "reply": record.reply, "error": record.error,
    }, every)
    lengths: list[int] = []
    _measure(data, lengths)
    cap = _longest_allowed(lengths, limit)
    return data if cap is None else _truncated(data, cap)


def _plain(value: Any, secrets: list[str]) -> Any:
    """``value`` as JSON data (unknown objects as their text), every string scrubbed."""
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {str(k): _plain(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, secrets) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return scrub(str(value), secrets)


def _measure(value: Any, into: list[int]) -> None:
    if isinstance(value, str):
        into.append(len(value))
    elif isinstance(value, dict):
        for v in value.values():
            _measure(v, into)
    elif isinstance(value, list):
        for v in value:
            _measure(v, into)


def _longest_allowed(lengths: list[int], limit: int) -> int | None:
    """The longest a string may stay so that all of them add up to at most ``limit`` characters,
    shortening only the longest (None: everything fits)."""
    if sum(lengths) <= limit:
        return None
    left = limit
    ordered = sorted(lengths)
    for index, length in enumerate(ordered):
        share = left // (len(ordered) - index)
        if length > share:
            return share
        left -= length
    return None  # pragma: no cover - the sum was over the limit, so some string is over its share


def _truncated(value: Any, cap: int) -> Any:
    if isinstance(value, str):
        if len(value) <= cap:
            return value
        return f"{value[:cap]}\n[… {len(value) - cap} more characters not kept]"
    if isinstance(value, dict):
        return {k: _truncated(v, cap) for k, v in value.items()}
    if isinstance(value, list):
        return [_truncated(v, cap) for v in value]
    return value
