"""Keeping a ReAct loop honest: its turns counted aloud, a rejected reply shown as the model sent
it, and a loop that only repeats itself stopped early instead of running out its turns.

The loop (``react``) asks this module what a reply amounts to (``reply_key``) and whether the
model is stuck (``Repeats``); the events it emits carry the reply through ``clip_reply``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

REPEAT_LIMIT = 3  # the same reply this many times in a row ends the loop
REPLY_EVENT_LIMIT = 2000  # characters of a rejected reply an event keeps (the page shows them)

NO_ANSWER_FORMAT = "the model did not follow the answer format"


def repeated_reason(count: int) -> str:
    """Why a loop that repeats itself ended, in plain words (shown to people, stored in English)."""
    return f"{NO_ANSWER_FORMAT}: it sent the same reply {count} times in a row"


class AnswerFormatError(Exception):
    """The loop ended without an answer: the model kept sending the same reply.

    Not an ``LLMError``: another attempt sends the same conversation and gets the same reply, so
    the agent fails at once instead of retrying the task (``retryable`` says so to a caller that
    asks, such as a tool that runs an agent).
    """

    retryable = False


def _squash(text: str) -> str:
    return " ".join(text.split())


def _args_key(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return _squash(arguments)
    return json.dumps(arguments, sort_keys=True, default=str)


def reply_key(text: str, *, action: tuple[str, Any] | None = None,
              calls: Sequence[tuple[str, Any]] = ()) -> str:
    """What makes two replies "the same": the tool calls they make (their thoughts may differ in a
    word or two), else their text, whitespace aside."""
    if calls:
        return "calls:" + json.dumps([(name, _args_key(args)) for name, args in calls])
    if action is not None:
        return "action:" + json.dumps([action[0].strip(), _args_key(action[1])])
    return "text:" + _squash(text)


class Repeats:
    """How many replies in a row have been the same, and the last of them as the model wrote it."""

    __slots__ = ("count", "key", "reply")

    def __init__(self) -> None:
        self.key: str | None = None
        self.count = 0
        self.reply = ""

    def see(self, key: str, reply: str) -> None:
        self.count = self.count + 1 if key == self.key else 1
        self.key, self.reply = key, reply

    @property
    def stuck(self) -> bool:
        return self.count >= REPEAT_LIMIT


def clip_reply(text: str) -> dict[str, Any]:
    """A reply for an event: ``reply`` (its first ``REPLY_EVENT_LIMIT`` characters) and
    ``reply_chars`` (its whole length: more than ``reply`` holds when it was cut).

    It is the model's text, untrusted: the page escapes it like any other event text.
    """
    return {"reply": text[:REPLY_EVENT_LIMIT], "reply_chars": len(text)}
