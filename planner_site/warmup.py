"""Warming a run worker: what a run imports (litellm above all), done before the first run needs it.

Bench: ``bench/startup.py`` prints the first run after "ready" against a later one (issue #20:
within 1 s of it; 8-10 s before, when litellm was imported by the first call) and the server
loop's longest pause under a soak (``gc.freeze()`` took a full collection with litellm loaded
from ~0.5 s to nothing). litellm is loaded only when one of the site's LLMs goes through it: the
demo model and ``openai/…`` models (the direct path) do not.

``serve`` answers pages at once and warms in a thread beside them; it says "ready" once warm, and
``/api/health`` reports the worker as ``"warming"`` until then. ``db_worker`` warms before it
takes its first run. Pages never import litellm (tests/planner_site/test_lazy_imports.py).

Both commands also take the same care of a long-lived process's memory (``bench/soak.py``, #20):
at most two malloc arenas (``fewer_malloc_arenas``) and a full collection every second while runs
allocate (``collect_periodically``).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

# httpx imports its command-line client whenever rich, pygments and click are installed (litellm's
# dependencies install them): ~95 modules and 8 MiB of a serving process's RSS (bench/soak.py,
# #20) that a server never runs. Marked absent before anything imports httpx (serve and db_worker
# import this module first), httpx defines a stub ``httpx.main`` instead.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

_warm = threading.Event()
_started = threading.Event()  # this process warms (it runs workers): health reports it
_lock = threading.Lock()

# Collections of the youngest generation after this many new container objects (CPython's default
# is 2,000): a run allocates in bursts (a streamed answer, an event batch), and with the imports
# frozen the collections that remain are cheap, so fewer of them is a plain saving.
GC_THRESHOLD = (20_000, 20, 40)
# With full collections that rare, runs' cyclic garbage (5,000-8,000 objects a second of runs)
# reaches the oldest generation and waits there: the server's RSS grew 6 MiB over 90 sequential
# runs. ``serve`` collects fully once a second while anything allocates (flat within 2 MiB from
# run 10 to 80; every 5 s was not enough); with the imports frozen that takes 15-25 ms at load 9
# (bench/soak.py, #20).
COLLECT_SECONDS = 1.0
# A full collection slower than this found a large unfrozen heap: a module loaded after warm-up
# (litellm, when an admin adds its first non-OpenAI LLM or tests one), 0.3-0.5 s a collection.
SLOW_COLLECTION = 0.1


def collect() -> float:
    """One full collection (``serve`` runs it every ``COLLECT_SECONDS``); when it was slow, what
    survived it is frozen too, so a late import stalls the loop once, not every second."""
    started = time.perf_counter()
    gc.collect()
    took = time.perf_counter() - started
    if took > SLOW_COLLECTION:
        gc.freeze()
        logger.info("a full collection took %.2f s: froze what survived (%d objects frozen)",
                    took, gc.get_freeze_count())
    return took


def collect_periodically(every: float | None = None, *, loop: Any = None) -> Callable[[], None]:
    """``collect()`` every ``every`` seconds (``COLLECT_SECONDS``), skipped while the youngest
    generation saw no collection (nothing ran); returns what stops it.

    A daemon thread keeps the time: ``db_worker`` with one thread has no loop of its own. With
    ``loop`` (``serve``: Daphne's), the collection itself runs on that loop, so the finalizers of
    its objects (sockets, transports, sessions) run on the thread that owns them.
    """
    stopped = threading.Event()
    seconds = COLLECT_SECONDS if every is None else every

    def collect_there() -> None:
        if loop is None:
            collect()
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: the process is stopping
            loop.call_soon_threadsafe(collect)

    def ticking() -> None:
        seen = -1
        while not stopped.wait(seconds):
            if gc.get_stats()[0]["collections"] != seen:
                collect_there()
                seen = gc.get_stats()[0]["collections"]

    threading.Thread(target=ticking, name="collector", daemon=True).start()
    return stopped.set


def fewer_malloc_arenas() -> bool:
    """At most two of glibc's malloc arenas; call before the workers' threads start.

    glibc gives threads that allocate at once arenas of their own (up to eight per core), each
    keeping what it freed: with 32 workers and the loop's helper threads, 6 MiB more RSS at
    "ready" and after a soak than with two (bench/soak.py, #20: 146 against 139 MiB at ready).
    Python's own objects do not come from there, so its speed is unchanged. False where the
    allocator is not glibc's (it has no such knob).
    """
    with contextlib.suppress(OSError, AttributeError):
        return bool(ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, 2))  # as MALLOC_ARENA_MAX=2 does
    return False


M_ARENA_MAX = -8  # glibc's malloc.h


def is_warm() -> bool:
    return _warm.is_set()


def warming_started() -> bool:
    return _started.is_set()


def warm(*, litellm: bool | None = None) -> float:
    """Import what a run needs, then freeze what is loaded out of the collector's sight.

    litellm only when an LLM of this site goes through it (``litellm_needed``, or say so): one
    added later is imported by its first call, off the loop. Idempotent and thread-safe; returns
    the seconds it took (0 when already warm).
    """
    _started.set()
    with _lock:
        if _warm.is_set():
            return 0.0
        started = time.perf_counter()
        from agents.engine import gateway, wire

        if litellm is None:
            litellm = litellm_needed()
        if litellm:
            gateway._litellm()  # 2-4 s: its import, offline, quiet
            # httpx (litellm's client) loads its transport on its first connection (~70 modules).
            # The direct path is on aiohttp (imported with ``wire``): it needs none of them.
            import anyio._backends._asyncio  # noqa: F401
            import anyio.streams.tls  # noqa: F401
            import h11  # noqa: F401
            import httpcore  # noqa: F401
        wire.tls()  # the CA bundle, read once
        import encodings.idna  # noqa: F401 - aiohttp's first request to a host name

        from django.core.cache import cache

        # What the engine imports where it first needs it: an approved plan's steps, Plan-and-Act,
        # plan-execute, structured answers.
        import agents.engine.bound  # noqa: F401
        import agents.engine.drafting  # noqa: F401
        import agents.engine.output_json  # noqa: F401
        import agents.engine.plan_execute  # noqa: F401
        import agents.engine.planning  # noqa: F401

        try:
            cache.get("warm-up")  # the cache backend (who follows a run's deltas) loads on first use
        except Exception:  # noqa: BLE001 - Redis down: runs tolerate it (crews.runner), so do we
            logger.warning("the cache did not answer while warming up", exc_info=True)
        from agents.engine import model_facts

        model_facts._entries()  # litellm's price map, read once (~100 ms)
        from django.urls import get_resolver, reverse

        import crews.consumers  # noqa: F401 - the run page's sockets
        import crews.runner  # noqa: F401 - the engine and the run's Django side
        import planner_site.layers  # noqa: F401 - the channel layer a run publishes to

        # The URL configuration (every view, form and API schema: ~160 modules, 1-1.5 s) loads on
        # the first request otherwise: the first page, and the first run's kickoff.
        get_resolver().resolve("/api/health")
        reverse("api:health")

        # Everything loaded so far lives as long as the process: a full collection need never walk
        # it again (with litellm, ~0.5 s of the server loop's time each).
        gc.collect()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLD)
        _warm.set()
        took = time.perf_counter() - started
        logger.info("warm in %.1f s (%d objects frozen)", took, gc.get_freeze_count())
        return took


def litellm_needed() -> bool:
    """Whether an LLM of this site goes through litellm: neither the offline demo model nor one
    the direct path takes (``agents.engine.wire``). True when the database cannot tell."""
    try:
        from agents.engine.specs import LLMSpec
        from agents.engine.wire import handles
        from agents.models import DEMO_MODEL, LLM

        models = LLM.objects.exclude(model=DEMO_MODEL).values_list("model", flat=True)
        return any(not handles(LLMSpec(key="warm-up", model=model)) for model in models)
    except Exception:  # noqa: BLE001 - no database yet: load it, as a run might need it
        logger.warning("could not tell which LLMs this site has; loading litellm", exc_info=True)
        return True


def warm_in_background(then: object = None) -> threading.Thread:
    """``warm()`` in a daemon thread; ``then()`` (if given) runs in that thread once warm."""

    def work() -> None:
        try:
            warm()
        except Exception:  # a run would import the same modules and report the failure itself
            logger.exception("warming failed; the first run will import what it needs")
            _warm.set()  # done trying: health stops saying "warming"
        if callable(then):
            then()

    _started.set()  # before the thread runs: a health check right after "serving" says "warming"
    thread = threading.Thread(target=work, name="warm-up", daemon=True)
    thread.start()
    return thread
