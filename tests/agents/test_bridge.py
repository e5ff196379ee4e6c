"""ORM rows to engine specs: what an LLM row's params become in its ``LLMSpec``."""

from __future__ import annotations

from agents.bridge import llm_spec
from agents.models import LLM


def test_an_llms_timeouts_come_from_its_params_and_the_rest_keep_their_defaults() -> None:
    local = llm_spec(
        LLM(
            model="openai/local",
            supports_tools=True,
            params={"first_token_timeout": 300, "timeout": 900, "temperature": 0.2},
        )
    )
    hosted = llm_spec(LLM(model="openai/gpt-4o-mini", supports_tools=True))

    assert (local.connect_timeout, local.first_token_timeout, local.timeout) == (10.0, 300.0, 900.0)
    # The timeouts are the gateway's to apply, not parameters for litellm to pass on.
    assert local.params == {"temperature": 0.2}
    assert (hosted.connect_timeout, hosted.first_token_timeout, hosted.timeout) == (
        10.0,
        60.0,
        600.0,
    )
