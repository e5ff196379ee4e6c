"""What kind of provider failure an LLM error is: a stable ``kind`` the site words for people.

The gateway classifies what litellm raised (``kind_of_exception``: its type, HTTP status and
cause chain, which tells "could not connect" from "the connection dropped"); anything that only
kept the message (a plan's or a run's stored error) is classified from its words
(``kind_of_message``), and only where it is known to be an LLM call's error: a plan keeps the kind
its LLMError had (``crews.plans.plan_fail``), never read from the words of other errors. Events carry the kind next to the English message (``llm.failed``,
``task.failed``); the site translates by kind when it renders.
"""

from __future__ import annotations

import re

__all__ = ["KINDS", "kind_of_exception", "kind_of_message"]

AUTH = "auth"
MODEL_NOT_FOUND = "model_not_found"
ENDPOINT_NOT_FOUND = "endpoint_not_found"  # a 404 not about the model: a wrong API base (no /v1)
RATE_LIMITED = "rate_limited"
QUOTA = "quota"
CONTEXT_TOO_LONG = "context_too_long"
UNREACHABLE = "unreachable"
TIMEOUT = "timeout"
CONTENT_FILTER = "content_filter"
SERVER_ERROR = "server_error"
OTHER = "other"

KINDS = (AUTH, MODEL_NOT_FOUND, RATE_LIMITED, QUOTA, CONTEXT_TOO_LONG, UNREACHABLE, TIMEOUT,
         CONTENT_FILTER, SERVER_ERROR, OTHER, ENDPOINT_NOT_FOUND)

# Causes that mean no connection was made at all (httpx, aiohttp, the socket layer): a host that
# is down or a port nobody listens on. A connection that dropped mid-answer is not among them.
_NO_CONNECTION = frozenset({
    "ConnectError", "ConnectTimeout", "ClientConnectorError", "ClientConnectorDNSError",
    "ConnectionRefusedError", "gaierror",
})
_TIMEOUTS = frozenset({"Timeout", "TimeoutError", "APITimeoutError", "ReadTimeout", "TimeoutException"})

# A status code only where the text says it is one ("status 401", "Error code: 401", "HTTP 401")
# or where it leads the message (the direct path's "<status> <provider message>"): a bare number
# is as likely a column, a count or a char offset ("line 1 column 401 (char 400)").
def _status(codes: str) -> str:
    return rf"(?:\bstatus(?:[ _]code)?[:= ]\s*|\berror code:?\s*|\bhttp/?[0-9.]*\s+)(?:{codes})\b|^\s*(?:{codes})\b"


# An exhausted account rather than a short-term limit: a 429 is a rate limit unless it says so.
_QUOTA_GONE = re.compile(r"insufficient_quota|exceeded your current quota", re.I)
# A 404 about the model (vs. one from a wrong address, such as an API base without /v1).
_ABOUT_MODEL = re.compile(r"\bmodels?\b|model_not_found", re.I)

# Ordered: the first pattern that matches names the kind. litellm's messages start with its
# exception's class name ("litellm.AuthenticationError: ..."), which the gateway keeps. Only words
# a provider uses for that failure: never a bare field name (``api_key``) or an ordinary word
# (``billing``, ``quota``), which a task's name or a planner's error may hold.
_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (CONTEXT_TOO_LONG, re.compile(
        r"contextwindowexceeded|context[_ ]length|maximum context|context window|too many tokens"
        r"|prompt is too long|reduce the length", re.I)),
    (CONTENT_FILTER, re.compile(
        r"contentpolicyviolation|content[_ ]policy|content[_ ]filter|content management policy"
        r"|safety system|flagged by", re.I)),
    (QUOTA, re.compile(
        r"insufficient_quota|exceeded your current quota|credit balance is too low|payment required"
        r"|out of credits|" + _status("402"), re.I)),
    (AUTH, re.compile(
        r"authenticationerror|permissiondeniederror|incorrect api key|invalid api key|invalid_api_key"
        r"|api key not valid|no api key|missing api key|unauthori[sz]ed|" + _status("401|403"),
        re.I)),
    (MODEL_NOT_FOUND, re.compile(
        r"model[_ ]not[_ ]found|model .{0,80}(?:does not exist|not found)|no such model|unknown model",
        re.I)),
    (ENDPOINT_NOT_FOUND, re.compile(r"notfounderror|" + _status("404"), re.I)),
    (RATE_LIMITED, re.compile(r"ratelimiterror|rate[_ ]limit|too many requests|" + _status("429"), re.I)),
    (UNREACHABLE, re.compile(
        r"connection error|could not connect|cannot connect|connection refused|connecterror"
        r"|name or service not known|nodename nor servname|failed to resolve|unreachable"
        r"|apiconnectionerror", re.I)),
    (TIMEOUT, re.compile(
        r"no complete answer within|no first token within|timed out|timeout", re.I)),
    (SERVER_ERROR, re.compile(
        r"internalservererror|serviceunavailable|badgatewayerror|overloaded|" + _status("50[0-4]"), re.I)),
)


def kind_of_message(text: str) -> str:
    """The kind of failure an error message tells, from its words; ``other`` when none fits."""
    for kind, pattern in _WORDS:
        if pattern.search(text or ""):
            return MODEL_NOT_FOUND if kind == ENDPOINT_NOT_FOUND and _ABOUT_MODEL.search(text) else kind
    return OTHER


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen) and len(seen) < 12:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def kind_of_exception(exc: BaseException, status: int | None = None) -> str:
    """The kind of what a provider call raised: its cause chain and HTTP status first, then its
    words (the error body's ``code`` and message are in them)."""
    names = {type(e).__name__ for e in _chain(exc)}
    if names & _NO_CONNECTION:
        return UNREACHABLE
    text = str(exc)
    words = kind_of_message(text)
    if "ContextWindowExceededError" in names or words == CONTEXT_TOO_LONG:
        return CONTEXT_TOO_LONG
    if "ContentPolicyViolationError" in names or words == CONTENT_FILTER:
        return CONTENT_FILTER
    if status == 429 or "RateLimitError" in names:
        return QUOTA if _QUOTA_GONE.search(text) else RATE_LIMITED
    if status == 402 or words == QUOTA:
        return QUOTA
    if status in (401, 403) or names & {"AuthenticationError", "PermissionDeniedError"}:
        return AUTH
    if status == 404 or "NotFoundError" in names:
        return MODEL_NOT_FOUND if _ABOUT_MODEL.search(text) else ENDPOINT_NOT_FOUND
    if names & _TIMEOUTS or status == 408:
        return TIMEOUT
    if "APIConnectionError" in names and status is None:
        return UNREACHABLE
    if status is not None and status >= 500:
        return SERVER_ERROR
    return words
