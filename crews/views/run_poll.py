"""The run page's polling fallback: the fragments its websocket would have sent, over HTTP.

A page whose socket cannot connect (a proxy or network that drops websockets) asks this view
every few seconds for the events after the last one it shows (``static/run.js``). Each comes as the
very message ``RunEventsHtmlConsumer`` sends for it (``render_event_html``: the event-log row and
every part it changed), so the page swaps them in the same way and stays exactly-once by seq.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse, JsonResponse
from django.urls import URLPattern, path
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from agents.views import HtmxHttpRequest, domain_errors
from crews import selectors
from crews.bridge import payload_of
from crews.run_view import RunView, crew_plan_steps, plan_key, render_event_html
from crews.run_view.text import FINISHED

POLL_PAGE = 200  # events a poll answers at most; the page asks again at once for the rest


@login_not_required  # answered below as JSON: run.js cannot follow a redirect to the sign-in page
@require_GET
@never_cache
@domain_errors
def run_poll(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """``?after=<seq>``: ``{"events": [{"seq", "html"}], "more", "finished"}``, the messages of the
    stored events after ``seq`` in order; ``more`` when a page was not enough, ``finished`` once
    the last of them ended the run (the page then stops asking). Seen by whoever sees the run;
    a 401 once the person is signed out."""
    if not request.user.is_authenticated:
        return JsonResponse({"detail": _("Sign in again to follow the run.")}, status=401)
    run = selectors.run_get(user=request.user, run_id=run_id)
    try:
        after = int(request.GET.get("after", "0"))
    except ValueError:
        after = -1
    if after < 0:
        return JsonResponse({"detail": _("“after” must be an event number (0 or more).")}, status=422)
    stored = selectors.run_events(run=run, after=after, limit=POLL_PAGE)
    if not stored:  # an idle run: the page shows all there is. Its row ends with its last event.
        return JsonResponse({"events": [], "more": False, "finished": run.status in FINISHED})
    view = RunView.build(run, upto=after)  # the page as it is, as the socket's view would be
    can_write = selectors.run_can_write(user=request.user, run=run)
    events: list[dict[str, Any]] = []
    for row in stored:
        event = dict(payload_of(row))
        if event["type"] == "crew_plan.approved":  # the page lists the approved plan's steps
            key = plan_key(event["data"] or {})
            if key is not None and key not in view.plan_steps:
                view.plan_steps[key] = crew_plan_steps(*key)
        events.append({"seq": event["seq"], "html": render_event_html(view, event, can_write=can_write)})
    return JsonResponse({"events": events, "more": len(stored) == POLL_PAGE, "finished": view.finished})


urlpatterns: list[URLPattern] = [
    path("runs/<int:run_id>/poll/", run_poll, name="run-poll"),
]
