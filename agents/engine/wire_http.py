"""What the direct path (``wire``) takes from aiohttp: one session per event loop, set up as its
httpx client was, and the lines of an event stream.

A profile of a planned 2-task run (issue #20) had the HTTP client as the largest single cost of
the server's CPU: httpx, httpcore and h11 did their work per request and per HTTP chunk of a
stream. aiohttp (already installed: litellm depends on it) parses HTTP in C: one call against
the fake server (in its own process; the httpx code and this in turns, same run, load 1.7) went
from 1.36 to 0.52 ms of CPU streamed (~40 chunks) and from 0.58 to 0.21 ms unstreamed.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import ssl
import urllib.request
import weakref
from collections.abc import AsyncIterator

import aiohttp
from yarl import URL


class Proxies:
    """The proxy for each URL, from ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` and ``NO_PROXY``
    as they were when the session was made (as httpx's ``trust_env`` read them).

    Not aiohttp's ``trust_env``: it reads the environment and ``~/.netrc`` in a thread on every
    request, and a ``.netrc`` entry for the provider's host made every call fail (aiohttp refuses
    its login beside our ``Authorization`` header).
    """

    def __init__(self) -> None:
        self._env = urllib.request.getproxies_environment()
        # httpx's reading of NO_PROXY: "*" anywhere in the list bypasses every host, and an IPv6
        # entry may come in brackets; urllib's bypass check knows neither.
        names = [name.strip().strip("[]") for name in self._env.get("no", "").split(",")]
        self._bypass_all = "*" in names
        if "no" in self._env:
            self._env["no"] = ",".join(name for name in names if name)
        self._for: dict[tuple[str, str], tuple[URL | None, dict[str, str] | None]] = {}

    def __call__(self, url: URL) -> tuple[URL | None, dict[str, str] | None]:
        """The proxy for ``url`` and the headers it needs (its login), or (None, None)."""
        key = (url.scheme, f"{url.host}:{url.port}")  # NO_PROXY may name a host with its port
        found = self._for.get(key)
        if found is None:
            found = self._for[key] = self._lookup(url)
        return found

    def _lookup(self, url: URL) -> tuple[URL | None, dict[str, str] | None]:
        proxy = self._env.get(url.scheme) or self._env.get("all")
        host = f"{url.host}:{url.port}"
        if not proxy or self._bypass_all or (url.host and urllib.request.proxy_bypass_environment(host, self._env)):
            return None, None
        parsed = URL(proxy if "://" in proxy else f"http://{proxy}")
        # A login in the proxy's URL goes as its own header, not in the URL aiohttp connects to
        # (aiohttp 3.14 deprecates ``proxy_auth``). The caller sends it with the request itself
        # for an http:// URL (aiohttp sends ``proxy_headers`` only with a tunnel's CONNECT).
        if parsed.user is None:
            return parsed, None
        login = aiohttp.encode_basic_auth(parsed.user, parsed.password or "")
        return parsed.with_user(None), {"Proxy-Authorization": login}


class Client:
    """One event loop's session (made inside the running loop) and the proxies it uses.

    Closed by ``aclose``, or else with its loop: a session left open is logged as an error when it
    is collected ("Unclosed connector"), and a loop made for one call (``asyncio.run`` in
    ``agents.services.llm_test``, a test's) may end without a word to the gateway. A suspended
    async generator is what a loop does close as it ends (``shutdown_asyncgens``), or when it is
    dropped with the gateway; its ``finally`` closes the session.
    """

    __slots__ = ("session", "proxies", "_closer", "__weakref__")

    def __init__(self, tls: ssl.SSLContext | bool, user_agent: str, *, limit: int = 100) -> None:
        self.session = session(tls, user_agent, limit=limit)
        self.proxies = Proxies()
        self._closer = _close_with_loop(self.session)
        with contextlib.suppress(StopIteration):
            self._closer.asend(None).send(None)  # to its ``yield``: the loop now knows it
        # Collected in a reference cycle (or by a collection on another thread), the session's
        # own finalizer would run first and close the loop's sockets from wherever it runs:
        # this one hands the close to the session's loop instead, before anything is freed.
        weakref.finalize(self, _close_soon, asyncio.get_running_loop(), self.session)

    @property
    def closed(self) -> bool:
        return self.session.closed

    async def aclose(self) -> None:
        await self._closer.aclose()


def _close_soon(loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession) -> None:
    if session.closed or loop.is_closed():
        return
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
        loop.call_soon_threadsafe(lambda: loop.create_task(session.close()))


async def _close_with_loop(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await session.close()


def session(tls: ssl.SSLContext | bool, user_agent: str, *, limit: int = 100) -> aiohttp.ClientSession:
    """A session for one event loop (made inside it). At most ``limit`` connections (100, as
    httpx's client; 0: no cap); any number to one host."""
    return aiohttp.ClientSession(
        # Idle connections kept 4 s, under the 5 s after which uvicorn (vLLM) closes them: a POST
        # on a connection the server just closed fails (aiohttp's default keeps them 15 s).
        connector=aiohttp.TCPConnector(ssl=tls, limit=limit, limit_per_host=0, keepalive_timeout=4),
        headers={"User-Agent": user_agent},
        # A provider's cookies (its load balancer's, say) are sent back by each gateway itself
        # (``wire.WireGateway``): a session may serve several people's runs.
        cookie_jar=aiohttp.DummyCookieJar(),
    )


@functools.lru_cache(maxsize=64)
def endpoint(api_base: str) -> URL:
    """The chat completions URL of an API base, parsed once."""
    return URL(api_base.rstrip("/") + "/chat/completions")


@functools.lru_cache(maxsize=64)
def timeout(connect: float, read: float) -> aiohttp.ClientTimeout:
    """Connecting (a free connection from the pool included) within ``connect`` seconds, and no
    read waiting longer than ``read``; the whole call's limit is the caller's (``wire``)."""
    return aiohttp.ClientTimeout(total=None, connect=connect, sock_connect=connect, sock_read=read)


def encoding(response: aiohttp.ClientResponse) -> str:
    """UTF-8 (the SSE format's own), or the charset the Content-Type names."""
    if "charset" not in response.headers.get("content-type", "").lower():
        return "utf-8"  # without parsing the header
    return response.get_encoding()


class SSELines:
    """The lines of an event stream, fed a network read at a time (``feed``, then ``end``).

    ``\\n``, ``\\r\\n`` and ``\\r`` end a line, as the SSE format says; a ``\\r\\n`` may come out as
    a line and a blank line after it, which a reader of events skips anyway. A line or a
    multi-byte character cut between two reads comes out whole. Unlike ``str.splitlines``, a
    U+2028 inside a chunk's JSON does not cut its line. Synchronous, so the reader awaits the
    socket itself: an async generator between them cost a frame switch per read (issue #20).
    """

    __slots__ = ("_encoding", "_rest", "_decoder", "_text")

    def __init__(self, encoding: str = "utf-8") -> None:
        try:
            ascii_compatible = "data:\n".encode(encoding) == b"data:\n"
        except (LookupError, UnicodeError):
            encoding, ascii_compatible = "utf-8", True
        self._encoding = encoding
        self._rest = b""
        # UTF-16, EBCDIC: decoded first, then cut.
        self._decoder = None if ascii_compatible else codecs.getincrementaldecoder(encoding)("replace")
        self._text = ""

    def feed(self, data: bytes) -> list[str]:
        """The lines ``data`` completes (none while a line is still under way)."""
        if self._decoder is not None:
            text = self._text + self._decoder.decode(data).replace("\r", "\n")
            parts = text.split("\n")
            self._text = parts.pop()
            return parts
        if b"\r" in data:
            data = data.replace(b"\r", b"\n")
        end = data.rfind(b"\n")
        if end < 0:
            self._rest += data
            return []
        if self._rest:
            data, end = self._rest + data, end + len(self._rest)
        self._rest = data[end + 1 :]
        # One decoding for the read: b"\n" is never part of another character in an ASCII-
        # compatible charset, so this cuts where decoding each line would.
        return data[:end].decode(self._encoding, "replace").split("\n")

    def end(self) -> list[str]:
        """The last line, given even without an ending."""
        if self._decoder is not None:
            rest, self._text = self._text + self._decoder.decode(b"", final=True), ""
            return [rest] if rest else []
        rest, self._rest = self._rest, b""
        return [rest.decode(self._encoding, "replace")] if rest else []


async def sse_lines(reads: AsyncIterator[bytes], encoding: str = "utf-8") -> AsyncIterator[list[str]]:
    """The lines of an event stream (``SSELines``), a list for each network read that ends one
    (often one event's ``data:`` line and its blank separator); the last line is given at the
    end even without an ending.

    aiohttp's own line reading (``async for line in response.content``) ends lines at ``\\n``
    only.
    """
    lines = SSELines(encoding)
    async for data in reads:
        batch = lines.feed(data)
        if batch:
            yield batch
    rest = lines.end()
    if rest:
        yield rest
