"""The model layer: one protocol, the paths that implement it, and what wraps them.

    client.py        LLMClient: what the agent calls (chat, embed, transcribe, check_model)
    wrappers.py      Retrying (one model, retried) and Fallback (the next model)
    routing.py       which path serves a model name: the one rule
    protocol.py      ModelRequest, LLMResponse, Chunk and the Model protocol
    direct.py        the direct path: OpenAI-compatible chat completions over aiohttp
    litellm_path.py  the litellm path: every other provider, embeddings, speech
    canned.py        a chat completion answered on 127.0.0.1, for litellm's warm-up call
    function.py      FunctionModel: answers from a Python function, in-process
    stream.py        streamed answers: chunks to text deltas and one response
    failures.py      what a failed call means: retry, next model, or stop
    providers.py     which providers need a key, and where one resolves from (no call)

Importing this package never imports litellm.
"""

from clawgate.agent.llm.client import GENERIC_FAILURE, LLMClient, failure_reply
from clawgate.agent.llm.failures import ContextOverflow, ModelMisconfigured
from clawgate.agent.llm.function import FunctionFailure, FunctionModel
from clawgate.agent.llm.protocol import LLMResponse, Model, ModelRequest, ToolCall
from clawgate.agent.llm.stream import OnDelta, TextDelta

__all__ = [
    "GENERIC_FAILURE",
    "ContextOverflow",
    "FunctionFailure",
    "FunctionModel",
    "LLMClient",
    "LLMResponse",
    "Model",
    "ModelMisconfigured",
    "ModelRequest",
    "OnDelta",
    "TextDelta",
    "ToolCall",
    "failure_reply",
]
