"""A provider's words for what it refused, and when to try again: read from its errors.

Both live paths use these (``agents.engine.gateway`` for litellm, ``agents.engine.wire``): servers
differ in status codes, so the words decide which form of request was refused.
"""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any

from agents.engine.capabilities import JSON_OBJECT, JSON_SCHEMA, STREAM, TOOLS
from agents.engine.llm import LLMRequest

__all__ = ["VALIDATION_SHAPED", "refused_form", "retry_after_seconds"]

# A server's words for a request it will not take, read from the error (servers differ in status):
# Ollama "<model> does not support tools" (400), llama-server "tools param requires --jinja flag"
# and "Unsupported param: tool_choice" (500), vLLM '"auto" tool choice requires
# --enable-auto-tool-choice' (400), llama-cpp-python's pydantic "Input should be 'text' or
# 'json_object'" for a json_schema response format (500), LM Studio "'response_format.type' must
# be 'json_schema' or 'text'" for json_object (400).
_REFUSAL = re.compile(
    r"not support|unsupported|doesn't support|does not accept|not enabled|not allowed|not available"
    r"|requires --|--jinja|--enable-auto-tool-choice|input should be|must be|literal_error"
    r"|unrecognized|not permitted|extra inputs"
)
_TOOLS_MENTION = re.compile(r"\btools?\b|tool_choice|tool choice|function[ _]call|\bfunctions\b")
# OpenAI's 400 "Your organization must be verified to stream this model", an older server's
# "Unrecognized request argument supplied: stream_options". Not a key echoed with its value
# ("'stream': True" in a validation error about something else).
_STREAM_MENTION = re.compile(r"\bstream(?:_options|ing)?\b(?!['\"]?\s*:)")
_FORMAT_MENTION = re.compile(r"response_format|response format|json_schema|json_object|json mode|structured output")
VALIDATION_SHAPED = re.compile(
    r"validation error|literal_error|input should be|field required|extra_forbidden"
    r"|extra inputs are not permitted|unsupported param|invalid request|invalid_request_error"
    r"|\('body', "
)
# What an error allows, to tell which response format it refused: "should be 'text' or
# 'json_object'" refuses json_schema; "must be 'json_schema' or 'text'" refuses json_object.
_ALLOWED = re.compile(r"(?:should|must) be ([^.;\n]*)")


def refused_form(lowered: str, request: LLMRequest | None) -> str | None:
    """The form of request (``capabilities.FORMS``) an error says the server refused, or None."""
    if not _REFUSAL.search(lowered):
        return None
    sent_tools = request is None or bool(request.tools)
    sent_format = None if request is None or request.response_schema is None else request.response_form
    if _FORMAT_MENTION.search(lowered) and (request is None or sent_format is not None):
        if sent_format is not None:
            return sent_format
        allowed = " ".join(_ALLOWED.findall(lowered))
        if "json_schema" in lowered and "json_schema" not in allowed:
            return JSON_SCHEMA
        if "json_object" in lowered and "json_object" not in allowed:
            return JSON_OBJECT
        return JSON_SCHEMA if "json_schema" in lowered else None
    if sent_tools and _TOOLS_MENTION.search(lowered):
        return TOOLS
    if (request is None or request.stream) and _STREAM_MENTION.search(lowered):
        return STREAM
    return None


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), if any."""
    try:
        millis = headers.get("retry-after-ms")
        value = headers.get("retry-after") or headers.get("Retry-After")
    except Exception:  # noqa: BLE001 - odd header containers: no hint
        return None
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # an HTTP date
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
