"""What a model's provider needs before a call can succeed: whether it takes a key, and the
environment variable its SDK reads one from. Asked without a call and without litellm, by
`clawgate doctor` and onboard's questions, so a missing key is found before the first
message fails on it.

Where a key comes from, first found wins: `agent.api_key` (the file, or the override
CLAWGATE_AGENT__API_KEY), the variable `agent.api_key_env` names (read at load into
`api_key`), then the provider's own variable (OPENAI_API_KEY, ...), which litellm and the
direct path read by themselves. Providers in neither table (litellm knows many more) are
not judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clawgate.kernel.config import AgentConfig

# The variable each provider's SDK reads when no key is configured.
KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
}
# Local servers: no key by default.
KEYLESS_PROVIDERS = {"ollama", "ollama_chat", "lm_studio", "hosted_vllm", "llamafile"}
OVERRIDE = "CLAWGATE_AGENT__API_KEY"


def provider(model: str) -> str:
    """The provider prefix of a model name (`openai/gpt-4o-mini` -> openai)."""
    return model.split("/", 1)[0].lower() if "/" in model else "openai"


@dataclass(frozen=True)
class KeyCheck:
    """Whether a call could carry the key its provider needs; `text` says where the key
    comes from, or what to set."""

    found: bool
    text: str


def check_key(agent: AgentConfig, environ: Mapping[str, str]) -> KeyCheck:
    """The key `agent.model` would be called with, judged without a call."""
    named = agent.api_key_env
    if agent.api_key is not None and agent.api_key.get_secret_value():
        source = named if named and environ.get(named) else None
        return KeyCheck(True, f"api key from {source}" if source else "api key set")
    if named:
        # The owner chose where the key lives: naming any other place would mislead.
        return KeyCheck(
            False,
            f"no API key: agent.api_key_env names {named}, which is not set in this "
            f"environment: export {named}=... where clawgate runs",
        )
    name = provider(agent.model)
    variable = KEY_VARIABLES.get(name)
    if name in KEYLESS_PROVIDERS or variable is None:
        return KeyCheck(True, "no api key needed" if name in KEYLESS_PROVIDERS else "no api key")
    if environ.get(variable):
        return KeyCheck(True, f"api key from {variable}")
    local = " (a server that checks none takes any value)" if agent.api_base else ""
    return KeyCheck(False, f"no API key: set agent.api_key, {OVERRIDE} or {variable}{local}")
