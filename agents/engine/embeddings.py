"""Embedding texts with any litellm embedding model (knowledge search, issue #19).

litellm stays behind the gateway module: this one borrows its loader and its error mapping.
"""

from __future__ import annotations

from collections.abc import Sequence

from agents.engine.gateway import _http_timeout, _litellm, _map_error
from agents.engine.llm import LLMError
from agents.engine.specs import LLMSpec

BATCH = 64  # texts a request, well under providers' limits (OpenAI: 2048)


def embed(llm: LLMSpec, texts: Sequence[str]) -> list[list[float]]:
    """One vector per text, in order; raises ``LLMError`` (the key scrubbed from its message)."""
    litellm = _litellm()
    secret = llm.api_key.get_secret_value() if llm.api_key else None
    vectors: list[list[float]] = []
    for start in range(0, len(texts), BATCH):
        batch = list(texts[start : start + BATCH])
        try:
            response = litellm.embedding(
                model=llm.model, input=batch, api_base=llm.api_base, api_key=secret,
                timeout=_http_timeout(llm, streamed=False), **llm.params,
            )
        except LLMError:
            raise
        except Exception as exc:  # noqa: BLE001 - every provider error becomes an LLMError
            raise _map_error(litellm, exc, secret) from None
        items = sorted(response.data, key=lambda item: item["index"])
        vectors += [list(map(float, item["embedding"])) for item in items]
    return vectors
