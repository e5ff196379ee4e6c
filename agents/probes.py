"""Test connection's probes: which request forms an LLM accepts, and the context window it runs.

Each form (plain, streamed, native tools, ``json_schema``, ``json_object``) is one tiny real
completion through the engine gateway; the server's own window comes from what local servers
publish (llama.cpp ``/props``, vLLM ``/v1/models``, LM Studio ``/api/v0/models``, Ollama
``/api/ps`` and ``/api/show``).

The plain completion goes first, alone, with the LLM's own first-token limit (at most
``PLAIN_PROBE_SECONDS``): a local server may still be loading its model, and a single-slot
server (Ollama, llama.cpp) answers one request at a time. Only once it answered do the form
probes go out, together, each under a short limit (``PROBE_SECONDS``): the model is loaded by
then. A test therefore ends within about two and a half minutes even when the server never
answers, and within seconds when it is up.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import Any

from agents.engine.capabilities import JSON_OBJECT, JSON_SCHEMA, STREAM, TOOLS
from agents.engine.failures import OTHER, TIMEOUT
from agents.engine.llm import FormUnsupportedError, Gateway, LLMError, LLMRequest, RetryableLLMError
from agents.engine.specs import LLMSpec

PLAIN_PROBE_SECONDS = 120.0  # the most the plain probe waits for a first token (a model loading)
PROBE_SECONDS = 15.0  # each form probe, once the plain one answered
PROBE_CONNECT_SECONDS = 5.0  # the most a test waits for a host to take the connection
SERVER_INFO_SECONDS = 4.0  # each server-information request
FORMS_SECONDS = 20.0  # all the form probes together
PROBE_MAX_TOKENS = 16

_PROMPT = [{"role": "user", "content": "Say OK."}]
_TOOL = {
    "type": "function",
    "function": {
        "name": "current_time",
        "description": "The current time.",
        "parameters": {"type": "object", "properties": {}},
    },
}
_SCHEMA = {
    "title": "probe",
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
# How servers word a refusal of a parameter: "does not support tools", "response_format type
# must be one of text, json_object", pydantic's "Input should be 'text' or 'json_object'", LM
# Studio's "'response_format.type' must be 'json_schema' or 'text'" (to json_object)
_REFUSAL = re.compile(
    r"not support|unsupported|doesn'?t support|not enabled|not allowed|not implemented|invalid|"
    r"input should be|must be one of|unrecognized|unknown (?:field|parameter)|extra inputs|"
    r"validation error|not permitted|must be '",
    re.I,
)
_FORM_WORDS = {
    TOOLS: ("tool", "function"),
    JSON_SCHEMA: ("response_format", "json_schema", "schema", "grammar"),
    JSON_OBJECT: ("response_format", "json_object", "json"),
    STREAM: ("stream",),
}


@dataclass
class ProbeResult:
    ok: bool
    latency_ms: int
    error: str | None = None
    kind: str | None = None  # the kind of failure (``agents.engine.failures``) when not ok
    forms: dict[str, bool | None] = field(default_factory=dict)
    context_window: int | None = None
    context_source: str | None = None


def plain_error(message: str) -> str:
    """A failure as a person reads it: no litellm class names, tracebacks or server file paths."""
    text = re.sub(r"Traceback \(most recent call last\):.*", "", message, flags=re.S)
    text = re.sub(r'File "[^"]*"(, line \d+)?(, in \S+)?', "", text)
    text = re.sub(r"(?:[A-Za-z]:)?(?:[\\/][\w.@+-]+){2,}\.(?:py|pyx|c|cpp|h|gguf|bin)\b(?::\d+)?", "", text)
    text = re.sub(r"\b(?:litellm\.)?\w+(?:Error|Exception):\s*", "", text)
    text = re.sub(r"\b(?:OpenAI|Ollama|Hosted_vllm|LM_Studio)Exception\s*-\s*", "", text, flags=re.I)
    text = re.sub(r"\s+", " ", text).strip(" -:.") or "the server refused the request"
    return text[:300] + ("…" if len(text) > 300 else "")


def is_connection_failure(exc: LLMError) -> bool:
    lowered = str(exc).lower()
    return isinstance(exc, RetryableLLMError) and any(
        w in lowered for w in ("connect", "connection", "refused", "unreachable", "name or service")
    )


def refused(exc: LLMError, form: str) -> bool:
    """Whether ``exc`` says the server will not take ``form`` (not that it failed for a while)."""
    if isinstance(exc, FormUnsupportedError) and exc.form in ("", form):
        return True
    # Otherwise (another form named, or an error the gateway did not classify) by its wording.
    if is_connection_failure(exc) or "timeout" in str(exc).lower() or "timed out" in str(exc).lower():
        return False
    text = str(exc).lower()
    return bool(_REFUSAL.search(text)) and any(w in text for w in _FORM_WORDS[form])


async def probe(spec: LLMSpec, gateway: Gateway) -> ProbeResult:
    """Probe ``spec`` through ``gateway``: what it accepts, and the window its server runs.

    The plain completion first, alone and with the LLM's own first-token limit (bounded); the
    forms after it, together and under short limits. A failed plain completion fails the test
    and probes no form (they would fail for the same reason).
    """
    base = spec.model_copy(update={"max_retries": 0, "connect_timeout": min(spec.connect_timeout, PROBE_CONNECT_SECONDS),
                                   "refuses": frozenset()})
    first_token = min(spec.first_token_timeout, PLAIN_PROBE_SECONDS)
    plain_spec = base.model_copy(update={
        "first_token_timeout": first_token,
        "timeout": min(spec.timeout, first_token + PROBE_SECONDS),
    })
    form_spec = base.model_copy(update={
        "first_token_timeout": min(spec.first_token_timeout, PROBE_SECONDS),
        "timeout": min(spec.timeout, PROBE_SECONDS),
    })

    def request(llm: LLMSpec, purpose: str, **kw: Any) -> LLMRequest:
        return LLMRequest(llm=llm, messages=list(_PROMPT), purpose=purpose, max_tokens=PROBE_MAX_TOKENS, **kw)

    async def timed(coro: Any, seconds: float) -> Any:
        """The answer, or what was raised (a timeout, an ``LLMError``) as the outcome."""
        try:
            return await asyncio.wait_for(coro, seconds + 1)
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome to read
            return exc

    started = time.monotonic()
    # The server's window is read meanwhile: those are cheap GETs, not completions.
    window_job = asyncio.ensure_future(server_context_window(spec))
    plain = await timed(gateway.complete(request(plain_spec, "test")), plain_spec.timeout)
    latency_ms = int((time.monotonic() - started) * 1000)
    forms: dict[str, bool | None] = {}
    if not isinstance(plain, BaseException):
        jobs = {
            STREAM: gateway.complete(request(form_spec, "test_stream", stream=True)),
            TOOLS: gateway.complete(request(form_spec, "test_tools", tools=[_TOOL])),
            JSON_SCHEMA: gateway.complete(request(form_spec, "test_json_schema", response_schema=_SCHEMA)),
            JSON_OBJECT: gateway.complete(request(
                form_spec, "test_json_object", response_schema=_SCHEMA, response_form="json_object")),
        }
        try:
            outcomes = await asyncio.wait_for(
                asyncio.gather(*(timed(job, PROBE_SECONDS) for job in jobs.values()), return_exceptions=True),
                FORMS_SECONDS,
            )
        except TimeoutError:
            outcomes = [TimeoutError()] * len(jobs)
        for form, outcome in zip(jobs, outcomes, strict=True):
            if not isinstance(outcome, BaseException):
                forms[form] = True
            elif isinstance(outcome, LLMError) and refused(outcome, form):
                forms[form] = False
            else:
                forms[form] = None
    try:
        window = await asyncio.wait_for(window_job, SERVER_INFO_SECONDS * 2)
    except Exception:  # noqa: BLE001 - the window is a nice-to-have: unknown when it cannot be read
        window = None
    found = window if isinstance(window, tuple) else (None, None)
    result = ProbeResult(ok=True, latency_ms=latency_ms, forms=forms,
                         context_window=found[0], context_source=found[1])
    if isinstance(plain, BaseException):
        result.ok = False
        result.error = _failure(plain, spec, seconds=first_token)
        result.kind = plain.kind if isinstance(plain, LLMError) else TIMEOUT if isinstance(plain, TimeoutError) else OTHER
    return result


def _failure(exc: BaseException, spec: LLMSpec, *, seconds: float) -> str:
    where = spec.api_base or spec.model
    if isinstance(exc, TimeoutError):
        return f"No answer from {where} within {seconds:g} s."
    if isinstance(exc, LLMError) and is_connection_failure(exc):
        return f"Could not connect to {where}. Is the server running?"
    if isinstance(exc, LLMError):
        return plain_error(str(exc))
    return f"The test failed: {type(exc).__name__}."


# The server's own context window -----------------------------------------------------------


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _named(items: Any, name: str, key: str = "id") -> dict[str, Any] | None:
    if not isinstance(items, list):
        return None
    rows = [i for i in items if isinstance(i, dict)]
    return next((r for r in rows if r.get(key) == name), rows[0] if len(rows) == 1 else None)


async def server_context_window(spec: LLMSpec) -> tuple[int, str] | None:
    """(tokens, which server said so) from the first server-information endpoint that answers."""
    if not spec.api_base:
        return None
    base = spec.api_base.rstrip("/")
    root = base.removesuffix("/v1")
    name = spec.model.split("/", 1)[1] if "/" in spec.model else spec.model
    headers = {"Authorization": f"Bearer {spec.api_key.get_secret_value()}"} if spec.api_key else {}

    import httpx  # here: a server that never tests a connection need not load it (~10 MiB, #20)

    async with httpx.AsyncClient(timeout=SERVER_INFO_SECONDS, headers=headers) as client:

        async def get(method: str, url: str, body: Any = None) -> Any:
            try:
                response = await client.request(method, url, json=body)
                return response.json() if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                return None

        def llamacpp(data: Any) -> int | None:
            if not isinstance(data, dict):
                return None
            settings = data.get("default_generation_settings")
            return _int((settings or {}).get("n_ctx") if isinstance(settings, dict) else None) or _int(data.get("n_ctx"))

        def vllm(data: Any) -> int | None:
            row = _named(data.get("data") if isinstance(data, dict) else None, name)
            return _int(row.get("max_model_len")) if row else None

        def lmstudio(data: Any) -> int | None:
            row = _named(data.get("data") if isinstance(data, dict) else None, name)
            return (_int(row.get("loaded_context_length")) or _int(row.get("max_context_length"))) if row else None

        def ollama_running(data: Any) -> int | None:
            row = _named(data.get("models") if isinstance(data, dict) else None, name, "name")
            return _int(row.get("context_length")) if row else None

        def ollama_model(data: Any) -> int | None:
            params = data.get("parameters") if isinstance(data, dict) else None
            found = re.search(r"^\s*num_ctx\s+(\d+)", params, re.M) if isinstance(params, str) else None
            return int(found.group(1)) if found else None

        checks = (
            ("llama.cpp", get("GET", f"{root}/props"), llamacpp),
            ("vLLM", get("GET", f"{root}/v1/models"), vllm),
            ("LM Studio", get("GET", f"{root}/api/v0/models"), lmstudio),
            ("Ollama", get("GET", f"{root}/api/ps"), ollama_running),
            ("Ollama", get("POST", f"{root}/api/show", {"model": name}), ollama_model),
        )
        answers = await asyncio.gather(*(request for _source, request, _read in checks))
    for (source, _request, read), data in zip(checks, answers, strict=True):
        tokens = read(data) if data is not None else None
        if tokens:
            return tokens, source
    return None
