"""Model profiles: the budgets that suit one model on one kind of box.

A 3 s run suits Qwen2-7B under vLLM on a GPU; SmolLM2-135M on two CPU cores needs some 20 s for its
first step alone. The profile named by `[llm] profile` sets the run's step, wall and token budgets and
each request's timeout and reply limit; a key set in `[loop]` or `[llm]` itself still wins, so a plant
can tune one figure without writing a profile. `[llm.profiles.NAME]` adds or replaces a profile.
Measure a model's figures with `scripts/bench_llm.py` before writing them down.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BUILT_IN_PROFILES", "MODEL_STEPS_ROOM", "STEP1_PROMPT_TOKENS", "ModelProfile"]


class ModelProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The server's context window: the run's token budget (prompt plus reply of its last request).
    context_tokens: int = Field(ge=512)
    max_steps: int = Field(ge=1)
    # The model's part of a run; a hand-over to the rules planner gets `[loop] handover_wall_s` more.
    max_wall_s: float = Field(gt=0)
    request_timeout_s: float = Field(gt=0)
    # Room for the longest step, a Chinese final answer with steps and citations (about 1.5 tokens
    # per character); a reply cut at this limit is a format error.
    max_tokens_per_step: int = Field(ge=16)
    # Send the system prompt once when fixloop starts, so that the server's prefix cache holds it before
    # the first technician asks: on a CPU the first 1,500-token prompt costs several times a later step.
    prime_prompt: bool = False


# A run's context holds the step-1 prompt (at most 1,500 tokens with the session's history) and, for each
# model step, its reply and one observation (up to `[loop] observation_max_chars`, about 515 tokens): the
# profiles leave room for at least `MODEL_STEPS_ROOM` such steps, so a model can search, read and answer
# even when the rules' steps come first (tests/test_llm_servers.py checks the sum).
STEP1_PROMPT_TOKENS = 1500
MODEL_STEPS_ROOM = 4

BUILT_IN_PROFILES: dict[str, ModelProfile] = {
    # The field report's box: Qwen2-7B-Instruct AWQ under vLLM with prefix caching on a Jetson Orin or a GPU
    # (its unit's --max-model-len is 8192).
    "gpu-7b": ModelProfile(
        context_tokens=6144, max_steps=6, max_wall_s=3.0, request_timeout_s=2.5, max_tokens_per_step=640
    ),
    # A 0.5B-3B instruct GGUF under llama.cpp on an industrial PC with 4-16 cores (docs/deploy-cpu-only.md);
    # its unit gives each of its slots 8192 tokens, this context plus one more reply and observation.
    "cpu-3b": ModelProfile(
        context_tokens=5632,
        max_steps=6,
        max_wall_s=60.0,
        request_timeout_s=30.0,
        max_tokens_per_step=384,
        prime_prompt=True,
    ),
    # SmolLM2-135M-Instruct on two cores, the model CI and `fixloop demo --llm local` run (its GGUF's
    # context length is 8,192); about 20 s for the first 1,500-token prompt a server sees, 2-4 s a step once
    # the prompt's start is in its cache (`fixloop` primes it at start) (scripts/bench_llm.py).
    "cpu-tiny": ModelProfile(
        context_tokens=5120,
        max_steps=6,
        max_wall_s=60.0,
        request_timeout_s=30.0,
        max_tokens_per_step=256,
        prime_prompt=True,
    ),
}
