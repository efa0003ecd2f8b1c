"""The local model server as a plant runs it, against the real llama-cpp-python server with SmolLM2
(`real_llm`, shared with tests/test_real_model.py): llama.cpp leaves a core to fixloop, a request the
client gives up on stops computing, and runs that ask together wait their turn without tripping the
breaker. Each request here is a few tokens: the whole module takes seconds once the server is up."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from edge.llm.breaker import LlmBreaker
from edge.llm.client import ChatClient
from edge.run import LlmUnavailable

COUNT = [{"role": "user", "content": "Write the numbers from 1 to 500, separated by spaces."}]
DISCONNECTED = "Disconnected from client"


def log_of(real_llm) -> str:
    return real_llm.server.log_path.read_text(errors="replace")


def test_llama_cpp_runs_on_the_cores_less_one(real_llm):
    cores = len(os.sched_getaffinity(0))
    argv = Path(f"/proc/{real_llm.server.process.pid}/cmdline").read_bytes().decode().split("\0")
    # Both: generation's threads, and the prompt's, which llama-cpp-python sets to every core by default.
    for option in ("--n_threads", "--n_threads_batch"):
        assert argv[argv.index(option) + 1] == str(max(1, cores - 1)), option


def test_a_request_the_client_gives_up_on_stops_computing(real_llm):
    client = ChatClient(real_llm.env["FIXLOOP_LLM_URL"], real_llm.server.model, timeout_s=30, max_tokens=400)
    try:
        before = log_of(real_llm).count(DISCONNECTED)
        with pytest.raises(LlmUnavailable, match="did not finish its reply"):
            client.chat(COUNT, timeout_s=0.5)
        # The server notices the closed connection at its next token and drops the reply: a reply run to
        # its end (400 tokens, many seconds here) would log no disconnection.
        deadline = time.monotonic() + 30
        while log_of(real_llm).count(DISCONNECTED) == before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert log_of(real_llm).count(DISCONNECTED) == before + 1
        assert client.chat([{"role": "user", "content": "Say hi."}], max_tokens=2).completion_tokens
    finally:
        client.close()


def test_runs_asking_together_queue_for_the_one_at_a_time_server_instead_of_tripping_the_breaker(real_llm):
    breaker = LlmBreaker(threshold=1, open_s=60)
    client = ChatClient(
        real_llm.env["FIXLOOP_LLM_URL"], real_llm.server.model, timeout_s=30, max_tokens=12, breaker=breaker
    )
    try:
        client.chat(COUNT)  # the prompt is cached from here on, as for the six below
        one = client.chat(COUNT)
        # Each request gets twice what one takes; the last of six waits five times that for its turn. (A floor of
        # 0.5 s under it was more than two of SmolLM2's 12-token replies on a quiet box: six took 0.97 s.)
        client.timeout_s = 2 * one.latency_ms / 1000
        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(lambda _: client.chat(COUNT, time_left_s=120), range(6)))
        assert all(r.finish_reason == "length" and r.completion_tokens for r in replies)
        assert max(r.latency_ms for r in replies) > client.timeout_s * 1000  # someone did wait past it
        assert breaker.snapshot()["state"] == "closed" and breaker.snapshot()["consecutive_failures"] == 0
    finally:
        client.close()
