"""What each LLM accepts, learned rather than guessed: the forms of request it has refused.

Plain OpenAI-compatible servers (llama.cpp, Ollama, vLLM, LM Studio) often refuse native tool
calls or a ``json_schema`` response format. A refusal (``llm.FormUnsupportedError``) is learned
once per LLM: the caller negotiates down to a simpler form and no later request in this process
sends the refused one again. ``on_learned`` lets the site store what was learned (the LLM's
``capabilities``), so the next run starts from it (``LLMSpec.refuses``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from agents.engine.specs import LLMSpec

logger = logging.getLogger(__name__)

# The forms of request a provider may refuse, most structured first for answers with a shape.
TOOLS, JSON_SCHEMA, JSON_OBJECT, STREAM = "tools", "json_schema", "json_object", "stream"
FORMS = (TOOLS, JSON_SCHEMA, JSON_OBJECT, STREAM)

OnLearned = Callable[[LLMSpec, str], Awaitable[None]]


class Capabilities:
    """The refusals learned in this process, by LLM key, on top of what each ``LLMSpec`` knows."""

    def __init__(self, on_learned: OnLearned | None = None) -> None:
        self.on_learned = on_learned
        self._refused: dict[str, set[str]] = {}

    def refuses(self, llm: LLMSpec, form: str) -> bool:
        return form in llm.refuses or form in self._refused.get(llm.key, ())

    def accepts(self, llm: LLMSpec, form: str) -> bool:
        return not self.refuses(llm, form)

    async def learn(self, llm: LLMSpec, form: str) -> None:
        """Remember that ``llm`` refused ``form`` (told to ``on_learned`` the first time).

        Storing it is best effort: a failure of ``on_learned`` is logged, and the call that
        learned it carries on (this process still remembers the refusal).
        """
        if form not in FORMS or self.refuses(llm, form):
            return
        self._refused.setdefault(llm.key, set()).add(form)
        if self.on_learned is not None:
            try:
                await self.on_learned(llm, form)
            except Exception:  # noqa: BLE001 - a store that fails must not fail the call
                logger.warning("could not store that LLM %s refuses %s", llm.key, form, exc_info=True)
