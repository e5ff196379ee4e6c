"""REST operations of the agents app: LLMs, prompt templates, tools, agents."""

from ninja import Router

router = Router(tags=["agents"])
