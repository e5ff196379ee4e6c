"""Encryption of secrets at rest (LLM keys) with MultiFernet keys from settings."""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretUnreadable(Exception):
    """A stored secret cannot be decrypted with any configured key."""


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(k.encode()) for k in keys])


def _current() -> MultiFernet:
    return _fernet(tuple(settings.PLANNER_SECRETS_KEYS))


def encrypt(plain: str) -> str:
    return _current().encrypt(plain.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _current().decrypt(token.encode()).decode()
    except InvalidToken:
        # Never fall back to returning the ciphertext: a wrong key must be loud.
        raise SecretUnreadable("stored secret cannot be decrypted with the configured keys") from None


def rotate(token: str) -> str:
    """Re-encrypt ``token`` with the first (newest) key."""
    try:
        return _current().rotate(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("stored secret cannot be decrypted with the configured keys") from None
