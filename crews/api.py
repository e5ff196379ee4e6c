"""REST operations of the crews app: crews, tasks, plans, runs."""

from ninja import Router

router = Router(tags=["crews"])
