"""Crew Planner settings, read from the environment (see README.md for every variable)."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP
from django.utils.translation import gettext_lazy as _

from planner_site.env import env_bool, env_float, env_int, env_list, env_str
from planner_site.local_secrets import (
    local_fernet_keys,
    local_secret_key,
    private_dir,
    private_file,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PLANNER_VAR_DIR", str(BASE_DIR / "var")))  # type: ignore[arg-type]

# litellm fetches its price map from the internet at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Production refuses to invent secrets; a local run generates them once into var/.
PRODUCTION = env_bool("PLANNER_PRODUCTION", False)
DEBUG = env_bool("DJANGO_DEBUG", False)

SECRET_KEY = env_str("DJANGO_SECRET_KEY")
_fernet = env_list("PLANNER_SECRETS_KEYS", [])
if PRODUCTION:
    if not SECRET_KEY:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY is required when PLANNER_PRODUCTION is on.")
    if not _fernet:
        raise ImproperlyConfigured("PLANNER_SECRETS_KEYS is required when PLANNER_PRODUCTION is on.")
    if DEBUG:
        raise ImproperlyConfigured("DJANGO_DEBUG must be off when PLANNER_PRODUCTION is on.")
SECRET_KEY = SECRET_KEY or local_secret_key(VAR_DIR)
# Fernet keys, newest first: the first encrypts, all decrypt (MultiFernet rotation).
PLANNER_SECRETS_KEYS = _fernet or local_fernet_keys(VAR_DIR)

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",  # must come first so runserver serves ASGI (websockets)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    # planner_site before django_tasks_db: its db_worker command (with a heartbeat) wins.
    "planner_site",
    "django_tasks_db",
    "ninja",  # serves Swagger UI's files locally instead of from a CDN
    "agents",
    "crews",
    "knowledge",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "planner_site.middleware.SignInRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "planner_site.urls"
ASGI_APPLICATION = "planner_site.asgi.application"
WSGI_APPLICATION = "planner_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "planner_site.context_processors.site",
            ],
        },
    },
    {
        # Only the hot fragments, as macros (planner_site/jinja2.py); files end in .jinja so the
        # engine above never picks one up by name.
        "NAME": "jinja2",
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": False,
        "OPTIONS": {
            "environment": "planner_site.jinja2.environment",
            "autoescape": True,
            "auto_reload": DEBUG,
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
else:
    # var/ and the database (with its -wal and -shm files) are readable by their owner only.
    private_dir(VAR_DIR)
    DATABASES = {
        "default": {
            "ENGINE": "planner_site.sqlite",  # Django's, writers queued in Python
            "NAME": private_file(VAR_DIR / "planner.sqlite3"),
            # A new SQLite connection costs ~0.7 ms of CPU (SQLite reads the schema on its first
            # statement). Every thread that touches the database here outlives its work (HTTP
            # requests borrow one: planner_site.http), so each keeps its connection.
            "CONN_MAX_AGE": 600,
            # WAL lets the web process read while the worker writes; IMMEDIATE avoids
            # "database is locked" on upgrade from read to write transactions.
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 times idle sockets out after 5 s, the same as channels-redis's
            # BZPOPMIN; a longer socket timeout keeps idle consumers alive.
            # capacity: a process's inbox holds 1,000 messages (channels_redis: 100), not dropping
            # events while a busy web process catches up on a burst (a dropped last event
            # would never reach its sockets; earlier ones are filled in from the database).
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "capacity": 1000},
        }
    }
else:
    # One process: channels' in-memory layer without its per-message sweeps (planner_site/layers.py).
    # A socket's queue holds 1,000 events (channels: 100), as the Redis layer's inbox does.
    CHANNEL_LAYERS = {"default": {"BACKEND": "planner_site.layers.LocalChannelLayer", "CONFIG": {"capacity": 1000}}}

# The cache holds who follows a run's streamed deltas (crews.realtime.follow_deltas): with Redis a
# worker in another process sees it too.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # Who follows a run's deltas is asked from the run's watch loop: a Redis that hangs
            # must fail that question in seconds (the run then streams), not hold the loop.
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "crews:crew-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("pt-br", _("Português (Brasil)"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# The embedded server serves static files itself (no separate web server in make run).
PLANNER_SERVE_STATIC = env_bool("PLANNER_SERVE_STATIC", True)

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_SSL_REDIRECT = PRODUCTION and env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31536000) if PRODUCTION else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = PRODUCTION
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if PRODUCTION else None
X_FRAME_OPTIONS = "DENY"
# Every page runs only the site's own script and style files: no inline <script>, style
# attribute, <style> element or on* handler anywhere (tests/test_csp.py scans the templates).
# 'self' covers the run page's same-origin websocket (ws: and wss:) in CSP Level 3 browsers.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "object-src": [CSP.NONE],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("PLANNER_LOG_LEVEL", "INFO")},
    "loggers": {
        # litellm logs request details at DEBUG; never let those through.
        "LiteLLM": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "django_tasks_db": {"level": "WARNING"},
    },
}

# Product settings.
# Runs one ``serve`` process executes at once (threads that mostly wait on LLMs); a web process
# in a scale-out set-up runs with 0 next to separate ``db_worker`` processes.
PLANNER_WORKERS = env_int("PLANNER_WORKERS", 32)
PLANNER_RUN_HEARTBEAT_SECONDS = env_int("PLANNER_RUN_HEARTBEAT_SECONDS", 5)
PLANNER_RUN_STALE_SECONDS = env_int("PLANNER_RUN_STALE_SECONDS", 30)
# A plan draft or regeneration not done this long after it started lost its worker.
PLANNER_PLAN_STALE_SECONDS = env_int("PLANNER_PLAN_STALE_SECONDS", 900)
PLANNER_HTTP_TOOL_ALLOWED_HOSTS = env_list("PLANNER_HTTP_TOOL_ALLOWED_HOSTS", [])
PLANNER_KICKOFF_RATE_PER_MINUTE = env_int("PLANNER_KICKOFF_RATE_PER_MINUTE", 30)
# Knowledge sources (issue #19): upload limits, chunking, how much retrieved text a prompt gets.
PLANNER_KNOWLEDGE_MAX_FILE_BYTES = env_int("PLANNER_KNOWLEDGE_MAX_FILE_BYTES", 10 * 1024 * 1024)
PLANNER_KNOWLEDGE_MAX_SOURCES = env_int("PLANNER_KNOWLEDGE_MAX_SOURCES", 50)  # per agent or crew
PLANNER_KNOWLEDGE_MAX_CHUNKS = env_int("PLANNER_KNOWLEDGE_MAX_CHUNKS", 5_000)  # per source
PLANNER_KNOWLEDGE_CHUNK_CHARS = env_int("PLANNER_KNOWLEDGE_CHUNK_CHARS", 1_200)
PLANNER_KNOWLEDGE_CHUNK_OVERLAP = env_int("PLANNER_KNOWLEDGE_CHUNK_OVERLAP", 200)
PLANNER_KNOWLEDGE_TOKENS = env_int("PLANNER_KNOWLEDGE_TOKENS", 1_500)  # per task, chars/4
PLANNER_KNOWLEDGE_TOP_K = env_int("PLANNER_KNOWLEDGE_TOP_K", 5)
PLANNER_MEMORY_TOKENS = env_int("PLANNER_MEMORY_TOKENS", 500)
# The name of an LLM entry (set by an admin) whose model embeds chunks: any litellm embedding
# model. Empty: full-text search alone.
PLANNER_EMBEDDING_LLM = env_str("PLANNER_EMBEDDING_LLM", "") or ""
# The offline demo model paces itself like a hosted one (ENGINE.md §7), so a demo run can be
# watched and stopped: a wait before its first token, then a steady rate (0 = at once). The demo
# LLM's params "first_token_seconds" / "tokens_per_second" override these.
PLANNER_DEMO_FIRST_TOKEN_SECONDS = env_float("PLANNER_DEMO_FIRST_TOKEN_SECONDS", 0.7)
PLANNER_DEMO_TOKENS_PER_SECOND = env_float("PLANNER_DEMO_TOKENS_PER_SECOND", 60.0)
