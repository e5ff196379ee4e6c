"""The websocket origin check on the real ASGI app: Django's CSRF rule, scheme, host and port."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from planner_site.asgi import application
from planner_site.tokens import token_create

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "/ws/api/runs/999999/"  # the handshake is what is checked; the consumer then says 4404


@pytest.fixture
async def cookie(builder: Any) -> tuple[bytes, bytes]:
    def login() -> str:
        client = Client()
        client.force_login(builder)
        return client.cookies["sessionid"].value

    return (b"cookie", f"sessionid={await database_sync_to_async(login)()}".encode())


async def handshake(headers: list[tuple[bytes, bytes]], *, scheme: str = "ws") -> bool:
    communicator = WebsocketCommunicator(application, PATH, headers=headers)
    communicator.scope["scheme"] = scheme  # the scope the app gets (wss: a TLS connection)
    connected, _ = await communicator.connect(timeout=3)
    if connected:
        await communicator.disconnect()
    return connected


def browser(origin: str, host: str, cookie: tuple[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return [(b"origin", origin.encode()), (b"host", host.encode()), cookie]


async def test_the_same_scheme_host_and_port_is_accepted(cookie):
    assert await handshake(browser("http://127.0.0.1:8000", "127.0.0.1:8000", cookie))
    assert await handshake(browser("http://localhost", "localhost:80", cookie))  # default port
    assert await handshake(browser("https://localhost", "localhost", cookie), scheme="wss")


async def test_another_port_of_the_same_host_is_refused(cookie):
    assert not await handshake(browser("http://127.0.0.1:9999", "127.0.0.1:8000", cookie))
    assert not await handshake(browser("http://127.0.0.1:8000", "127.0.0.1", cookie))


async def test_another_scheme_of_the_same_host_and_port_is_refused(cookie):
    assert not await handshake(browser("https://127.0.0.1:8000", "127.0.0.1:8000", cookie))
    assert not await handshake(browser("http://localhost:443", "localhost:443", cookie), scheme="wss")


async def test_a_host_outside_allowed_hosts_or_an_odd_origin_is_refused(cookie):
    assert not await handshake(browser("http://evil.example", "evil.example", cookie))
    for origin in ("null", "file://", "ftp://127.0.0.1", "http://user@127.0.0.1", "http://127.0.0.1:x"):
        assert not await handshake(browser(origin, "127.0.0.1", cookie)), origin


async def test_a_proxy_saying_https_makes_the_origin_https(cookie, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.ALLOWED_HOSTS = ["planner.example"]
    proxied = [*browser("https://planner.example", "planner.example", cookie), (b"x-forwarded-proto", b"https")]

    assert await handshake(proxied)
    assert not await handshake(browser("https://planner.example", "planner.example", cookie))
    assert not await handshake([*browser("http://planner.example", "planner.example", cookie),
                                (b"x-forwarded-proto", b"https")])


async def test_csrf_trusted_origins_are_accepted(cookie, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://app.example.com", "https://*.corp.example"]

    assert await handshake(browser("https://app.example.com", "127.0.0.1:8000", cookie))
    assert await handshake(browser("https://a.corp.example", "127.0.0.1:8000", cookie))
    assert not await handshake(browser("http://app.example.com", "127.0.0.1:8000", cookie))
    assert not await handshake(browser("https://app.example.com:8443", "127.0.0.1:8000", cookie))


async def test_without_an_origin_a_cookie_is_refused_and_a_token_is_served(builder, cookie):
    """Browsers always send Origin on a websocket: a cookie without one is not a page of ours.
    API clients send none and authenticate with a bearer token (API.md, Websockets)."""
    _token, raw = await database_sync_to_async(token_create)(user=builder)

    assert not await handshake([(b"host", b"127.0.0.1"), cookie])
    assert await handshake([(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {raw}".encode())])
    # Any Origin a client does send is checked, token or not.
    assert not await handshake([(b"origin", b"http://evil.example"), (b"host", b"127.0.0.1"),
                                (b"authorization", f"Bearer {raw}".encode())])
