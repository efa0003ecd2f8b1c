"""The language model's room: the client, one module per server's request shape, the breaker, token
accounting, the prompt, model profiles, the planner that turns a reply into one action, and the local
models and server this box can run.

The names below are the package's API. Each is imported from its module on first use, so the config
can read the profiles without loading httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from edge.llm.action_schema import ReplyEnvelope, decoding_schema
    from edge.llm.breaker import LlmBreaker
    from edge.llm.client import ChatClient, Completion
    from edge.llm.local_models import KNOWN_MODELS, KnownModel, model_file
    from edge.llm.local_server import LocalServer, start_local_server
    from edge.llm.planner import LlmPlanner
    from edge.llm.profiles import BUILT_IN_PROFILES, ModelProfile
    from edge.llm.scripted_server import ScriptedLlmServer
    from edge.llm.servers import Dialect, detect, dialect
    from edge.llm.tokens import estimate_prompt_tokens, estimate_text_tokens

_EXPORTS = {
    "BUILT_IN_PROFILES": "edge.llm.profiles",
    "KNOWN_MODELS": "edge.llm.local_models",
    "KnownModel": "edge.llm.local_models",
    "ChatClient": "edge.llm.client",
    "Completion": "edge.llm.client",
    "Dialect": "edge.llm.servers",
    "LlmBreaker": "edge.llm.breaker",
    "LlmPlanner": "edge.llm.planner",
    "LocalServer": "edge.llm.local_server",
    "ModelProfile": "edge.llm.profiles",
    "ReplyEnvelope": "edge.llm.action_schema",
    "ScriptedLlmServer": "edge.llm.scripted_server",
    "decoding_schema": "edge.llm.action_schema",
    "detect": "edge.llm.servers",
    "dialect": "edge.llm.servers",
    "estimate_prompt_tokens": "edge.llm.tokens",
    "estimate_text_tokens": "edge.llm.tokens",
    "model_file": "edge.llm.local_models",
    "start_local_server": "edge.llm.local_server",
}

__all__ = [
    "BUILT_IN_PROFILES",
    "KNOWN_MODELS",
    "ChatClient",
    "Completion",
    "Dialect",
    "KnownModel",
    "LlmBreaker",
    "LlmPlanner",
    "LocalServer",
    "ModelProfile",
    "ReplyEnvelope",
    "ScriptedLlmServer",
    "decoding_schema",
    "detect",
    "dialect",
    "estimate_prompt_tokens",
    "estimate_text_tokens",
    "model_file",
    "start_local_server",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
