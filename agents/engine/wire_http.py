"""What the direct path (``wire``) takes from httpx, without the work per call it does not need.

A profile of a planned 2-task run (issue #20) had the HTTP client as the largest single cost of
the server's CPU. With the three pieces here (and ``wire._Stream.chunk`` asking each field
once), one call against the fake server (in its own process; the old code and this in turns,
same run) costs ~15 % less CPU, streamed (~40 chunks: 1.65 -> 1.38 ms) or not (0.68 -> 0.58 ms).
What is left is httpcore's and h11's own work, per request and per HTTP chunk of a stream, which
httpx gives no way around.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import AsyncIterator
from typing import Any

import httpx


class Client(httpx.AsyncClient):
    """httpx's client, keeping its cookies in ``_Cookies`` (httpx reaches them through this
    property only)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lean_cookies = _Cookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._lean_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._lean_cookies = _Cookies(cookies)


class _Cookies(httpx.Cookies):
    """Cookies a provider sets (its load balancer's, say) are kept and sent back, as before; a
    response that sets none skips httpx's urllib request and email message (~30 µs a call)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


@functools.lru_cache(maxsize=64)
def endpoint(api_base: str) -> httpx.URL:
    """The chat completions URL of an API base, parsed once: ``client.build_request`` parsed a
    URL string twice a call (~45 µs with merging the headers twice)."""
    return httpx.URL(api_base.rstrip("/") + "/chat/completions")


async def sse_lines(response: httpx.Response) -> AsyncIterator[list[str]]:
    """The lines of an event stream, a list for each network read (often one event's ``data:``
    line and its blank separator); the last line is given at the end even without an ending.

    httpx's ``aiter_lines`` stacks four async generators on the body (raw bytes, decoded bytes,
    text, lines), each a step for every chunk, and parses the Content-Type with the email package
    for the charset. Here one generator splits the bytes on ``\\n`` and decodes each complete line,
    so a line or a multi-byte character cut between two reads comes out whole. ``\\n``, ``\\r\\n``
    and ``\\r`` end a line, as the SSE format says; a ``\\r\\n`` may come out as a line and a blank
    line after it, which a reader of events skips anyway. Unlike ``aiter_lines``
    (``str.splitlines``), a U+2028 inside a chunk's JSON does not cut its line.
    """
    encoding = _encoding(response)
    if encoding is None:  # a charset in which b"\n" is not the line ending: httpx's own way
        async for line in response.aiter_lines():
            yield [line]
        return
    # A compressed body (httpx asks for gzip) goes through httpx's decoder; a plain one as it came.
    reads = response.aiter_bytes() if "content-encoding" in response.headers else response.aiter_raw()
    rest = b""
    async for data in reads:
        if b"\r" in data:
            data = data.replace(b"\r", b"\n")
        if b"\n" not in data:
            rest += data
            continue
        parts = (rest + data).split(b"\n") if rest else data.split(b"\n")
        rest = parts.pop()
        yield [part.decode(encoding, "replace") for part in parts]
    if rest:
        yield [rest.decode(encoding, "replace")]


def _encoding(response: httpx.Response) -> str | None:
    """UTF-8 (the SSE format's own), or the charset the Content-Type names as httpx reads it;
    None when that charset is not ASCII-compatible (UTF-16, EBCDIC)."""
    if "charset" not in response.headers.get("content-type", "").lower():
        return "utf-8"  # without parsing the header (httpx does it with the email package)
    encoding = response.encoding or "utf-8"
    try:
        ascii_compatible = "data:\n".encode(encoding) == b"data:\n"
    except (LookupError, UnicodeError):
        return None
    return codecs.lookup(encoding).name if ascii_compatible else None
