"""Which path serves a model name: the one rule, and the table of direct providers.

`Router.model` decides, per name and request, and is the only place that does:

1. A model handed to `LLMClient(models=...)` under that name serves it (a FunctionModel).
2. With `agent.direct_http` on (the default), a name whose prefix is a direct provider
   below goes direct, as one JSON POST to its OpenAI-compatible chat completions:
   `openai/`, `openrouter/`, `deepseek/`, `hosted_vllm/`, `ollama/`, `ollama_chat/`,
   once its base URL is known (agent.api_base, the provider's environment variable, or
   its public default; hosted_vllm has none).
3. Except what litellm would rewrite or adapt: OpenAI's reasoning models (o1, o3, gpt-5
   ...), and for DeepSeek a request carrying images.
4. `anthropic/` and `gemini/` go direct too, each in its provider's own API: Anthropic's
   Messages API (anthropic.py, with prompt caching; base: agent.api_base,
   $ANTHROPIC_API_BASE, $ANTHROPIC_BASE_URL or api.anthropic.com, + `/v1/messages`) and
   Gemini's generateContent (gemini.py; base: agent.api_base, $GEMINI_API_BASE or
   generativelanguage.googleapis.com/v1beta, + `/models/<name>:generateContent`).
5. Everything else goes through litellm, as do embeddings and speech to text.

Which endpoint a direct name reaches, by its prefix (the rest is the name sent):
  openai/       agent.api_base, $OPENAI_BASE_URL, $OPENAI_API_BASE or api.openai.com
                (also vLLM, llama.cpp's server, LM Studio, Ollama's /v1 by api_base)
  openrouter/   agent.api_base, $OPENROUTER_API_BASE or openrouter.ai/api/v1
  deepseek/     agent.api_base, $DEEPSEEK_API_BASE or api.deepseek.com/beta
  hosted_vllm/  agent.api_base or $HOSTED_VLLM_API_BASE; no key needed
  ollama/, ollama_chat/   (agent.api_base, $OLLAMA_API_BASE or localhost:11434) + /v1
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from clawgate.agent.llm.anthropic import API_VERSION, AnthropicModel
from clawgate.agent.llm.direct import DirectModel, DirectTransport, Endpoint
from clawgate.agent.llm.gemini import GeminiModel
from clawgate.agent.llm.litellm_path import LitellmLib, LitellmModel
from clawgate.agent.llm.protocol import Model, ModelRequest
from clawgate.kernel.config import AgentConfig


@dataclass(frozen=True)
class _Provider:
    key_env: str
    base_envs: tuple[str, ...]
    default_base: str | None
    key_required: bool
    suffix: str = ""  # appended to the base when it lacks it (Ollama serves OpenAI at /v1)
    text_only: bool = False  # image content goes through litellm, which adapts it
    api: str = "openai"  # the wire format: OpenAI's chat completions, "anthropic", "gemini"


_PROVIDERS = {
    "openai": _Provider(
        "OPENAI_API_KEY", ("OPENAI_BASE_URL", "OPENAI_API_BASE"), "https://api.openai.com/v1", True
    ),
    "openrouter": _Provider(
        "OPENROUTER_API_KEY", ("OPENROUTER_API_BASE",), "https://openrouter.ai/api/v1", True
    ),
    "deepseek": _Provider(
        "DEEPSEEK_API_KEY",
        ("DEEPSEEK_API_BASE",),
        "https://api.deepseek.com/beta",
        True,
        text_only=True,
    ),
    "hosted_vllm": _Provider("HOSTED_VLLM_API_KEY", ("HOSTED_VLLM_API_BASE",), None, False),
    "ollama": _Provider(
        "OLLAMA_API_KEY", ("OLLAMA_API_BASE",), "http://localhost:11434", False, "/v1"
    ),
}
_PROVIDERS["ollama_chat"] = _PROVIDERS["ollama"]
_PROVIDERS["anthropic"] = _Provider(
    "ANTHROPIC_API_KEY",
    ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"),
    "https://api.anthropic.com",
    True,
    api="anthropic",
)
_PROVIDERS["gemini"] = _Provider(
    "GEMINI_API_KEY",
    ("GEMINI_API_BASE",),
    "https://generativelanguage.googleapis.com/v1beta",
    True,
    api="gemini",
)
_NATIVE: dict[str, type[AnthropicModel | GeminiModel]] = {
    "anthropic": AnthropicModel,
    "gemini": GeminiModel,
}
# OpenAI models whose parameters litellm rewrites (max_completion_tokens, fixed temperature).
_REWRITTEN_OPENAI = re.compile(r"(o\d|gpt-5)")


def endpoint(model: str, api_base: str | None, api_key: str | None) -> Endpoint | None:
    """The direct endpoint for `model`, or None when the litellm path must serve it."""
    prefix, sep, name = model.partition("/")
    provider = _PROVIDERS.get(prefix) if sep else None
    if provider is None or not name:
        return None
    if prefix == "openai" and _REWRITTEN_OPENAI.match(name):
        return None
    base = api_base or next(
        (os.environ[env] for env in provider.base_envs if os.environ.get(env)),
        provider.default_base,
    )
    if not base:
        return None
    base = base.rstrip("/")
    if provider.suffix and not base.endswith(provider.suffix):
        base += provider.suffix
    key = api_key or os.environ.get(provider.key_env) or None
    headers = {"Content-Type": "application/json"}
    url = f"{base}/chat/completions"
    if provider.api == "anthropic":
        headers["anthropic-version"] = API_VERSION
        url = f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"
        if key:
            headers["x-api-key"] = key
    elif provider.api == "gemini":
        url = f"{base}/models/{name}"  # + :generateContent or :streamGenerateContent
        if key:
            headers["x-goog-api-key"] = key
    elif key:
        headers["Authorization"] = f"Bearer {key}"
    return Endpoint(
        url=url,
        model=name,
        headers=headers,
        missing_key=provider.key_required and not key,
        text_only=provider.text_only,
        api=provider.api,
    )


class Router:
    """The models of one `LLMClient`, each made once per name and path."""

    def __init__(
        self,
        config: AgentConfig,
        direct: DirectTransport,
        litellm: LitellmLib,
        in_process: Iterable[Model] = (),
    ) -> None:
        self._config = config
        self._api_key = config.api_key.get_secret_value() if config.api_key else None
        self._direct = direct
        self._litellm = litellm
        self._in_process = {model.name: model for model in in_process}
        self._endpoints: dict[str, Endpoint | None] = {}
        self._direct_models: dict[str, Model] = {}
        self._litellm_models: dict[str, LitellmModel] = {}

    def model(self, name: str, request: ModelRequest | None = None) -> Model:
        """The model serving `name` for `request` (the rule in this module's docstring)."""
        if name in self._in_process:
            return self._in_process[name]
        target = self.endpoint(name)
        if target is None or (request is not None and not target.takes(request.messages)):
            return self.litellm(name)
        if name not in self._direct_models:
            native = _NATIVE.get(target.api)
            made = native or DirectModel
            self._direct_models[name] = made(name, target, self._direct)
        return self._direct_models[name]

    def endpoint(self, name: str) -> Endpoint | None:
        """The direct endpoint serving `name`, None for litellm; decided once per name."""
        if not self._config.direct_http or name in self._in_process:
            return None
        if name not in self._endpoints:
            self._endpoints[name] = endpoint(name, self._config.api_base, self._api_key)
        return self._endpoints[name]

    def litellm(self, name: str) -> LitellmModel:
        """`name` on the litellm path (chat, embeddings, speech)."""
        if name not in self._litellm_models:
            self._litellm_models[name] = LitellmModel(
                name,
                self._litellm,
                api_base=self._config.api_base,
                api_key=self._api_key,
                timeout=self._config.request_timeout,
            )
        return self._litellm_models[name]

    def needs_litellm(self) -> bool:
        """Some configured call goes through litellm (a model off the direct path, speech)."""
        models = [self._config.model, *self._config.fallback_models]
        return bool(self._config.transcription_model) or any(
            name not in self._in_process and self.endpoint(name) is None for name in models if name
        )

    def litellm_chat_model(self) -> str | None:
        """The first configured chat model litellm serves, if any."""
        models = [self._config.model, *self._config.fallback_models]
        return next(
            (n for n in models if n and n not in self._in_process and self.endpoint(n) is None),
            None,
        )

    def direct_tls(self) -> bool:
        """Some configured model goes direct to an https endpoint."""
        models = [self._config.model, *self._config.fallback_models]
        targets = (self.endpoint(name) for name in models if name)
        return any(t is not None and t.url.startswith("https:") for t in targets)
