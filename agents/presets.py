"""Starting points for the local model servers people run: Ollama, llama.cpp, vLLM, LM Studio.

Each speaks OpenAI's chat-completions API under ``/v1``, so every preset is an ``openai/<name>``
model with that server's usual address. Local models load slowly and answer slowly, so the
timeouts are generous; the context window starts small (Test connection reads the real one), and
whether the model takes tools is left to Test connection's probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext_lazy as _

# Seconds: to connect, to the first token (a model loading into memory), for the whole answer.
LOCAL_TIMEOUTS = {"connect_timeout": 10, "first_token_timeout": 300, "timeout": 900}


@dataclass(frozen=True)
class Preset:
    label: Any
    prefix: str
    example: str  # the model name filled in when none is given yet
    api_base: str
    context_window: int


PRESETS: dict[str, Preset] = {
    "ollama": Preset(_("Ollama"), "openai/", "llama3.2", "http://localhost:11434/v1", 4096),
    "llamacpp": Preset(_("llama.cpp server"), "openai/", "local-model", "http://localhost:8080/v1", 4096),
    "vllm": Preset(_("vLLM"), "openai/", "served-model", "http://localhost:8000/v1", 8192),
    "lmstudio": Preset(_("LM Studio"), "openai/", "local-model", "http://localhost:1234/v1", 4096),
}


def preset_choices() -> list[tuple[str, Any]]:
    return [("", _("None: fill in every field")), *((key, p.label) for key, p in PRESETS.items())]


def preset_apply(key: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (an LLM form's fields) with ``key``'s model prefix, address, timeouts and window.

    The model name and the parameters already typed are kept; only the provider prefix and the
    timeouts change.
    """
    preset = PRESETS[key]
    name = str(values.get("model") or "").strip()
    name = name.split("/", 1)[1] if "/" in name else name
    params = values.get("params")
    params = dict(params) if isinstance(params, dict) else {}
    params.update(LOCAL_TIMEOUTS)
    return {
        **values,
        "model": preset.prefix + (name or preset.example),
        "api_base": preset.api_base,
        "params": params,
        "context_window": preset.context_window,
        "supports_tools": None,
    }
