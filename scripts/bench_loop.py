"""The loop's own overhead per step, with a scripted zero-latency LLM.

Overhead = step time minus the LLM round trip minus the tool's own time:
prompt building, parsing, validation, envelope, bookkeeping. Baseline in
the same run: the bare HTTP round trip to the scripted server and the bare
tool call, so the figures can be read as ratios on a noisy machine.
Target: overhead p95 <= 15 ms.

    python scripts/bench_loop.py [--runs 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from bench_support import pct

from edge.agent import Agent
from edge.config import load_config
from edge.llm.scripted_server import ScriptedLlmServer
from knowledge.demo import build_demo_index
from tools.contract import ToolContext
from tools.plc.simulator import start_simulator

SCRIPT = [
    {
        "content": json.dumps(
            {
                "thought": "code",
                "action": "search_maintenance_manual_by_fault_code",
                "args": {"fault_code": "E102", "device_id": "press-3"},
            }
        )
    },
    {
        "content": json.dumps(
            {
                "thought": "sensor",
                "action": "read_plc_sensor_value",
                "args": {"device_id": "press-3", "sensor": "coolant_level"},
            }
        )
    },
    {
        "content": json.dumps(
            {"thought": "done", "final_answer": "Stop the press and check the coolant.", "evidence": ["obs-1", "obs-2"]}
        )
    },
]


def line(name: str, values: list[float]) -> str:
    return f"{name:<34} p50 {statistics.median(values):7.2f} ms   p95 {pct(values, 0.95):7.2f} ms   n={len(values)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as state, ScriptedLlmServer(SCRIPT) as llm:
        config = load_config(
            env={"FIXLOOP_STATE_DIR": state, "FIXLOOP_LLM_URL": llm.url, "FIXLOOP__LOOP__MAX_WALL_S": "30"}
        )
        index = build_demo_index(Path(state))
        config = config.model_copy(update={"knowledge": config.knowledge.model_copy(update={"index_file": str(index)})})
        endpoint = config.devices["press-3"].plc
        sim = start_simulator(config.devices, endpoint.host, endpoint.port)
        agent = Agent(config)
        try:
            overhead, llm_ms, tool_ms, step_ms = [], [], [], []
            for _ in range(args.runs):
                record = agent.ask("Press-3 shows E102, what should I do?", device_id="press-3")
                assert record.termination.reason == "final_answer", record.termination
                for step in record.steps:
                    llm_ms.append(step.llm.latency_ms)
                    tool_ms.append(step.tool_ms)
                    step_ms.append(step.step_ms)
                    overhead.append(step.step_ms - step.llm.latency_ms - step.tool_ms)

            bare_http, bare_tool = [], []
            manual = agent.registry.get("search_maintenance_manual_by_fault_code")
            parsed = manual.input_model.model_validate({"fault_code": "E102", "device_id": "press-3"})
            ctx = ToolContext(request_id="bench", run_id="bench", loop_step=1)
            body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            with httpx.Client() as client:
                for _ in range(args.runs):
                    started = time.perf_counter()
                    client.post(f"{llm.url}/chat/completions", json=body)
                    bare_http.append((time.perf_counter() - started) * 1000)
                    started = time.perf_counter()
                    manual.run(parsed, ctx)
                    bare_tool.append((time.perf_counter() - started) * 1000)
        finally:
            agent.close()
            sim.stop()

    print(f"fixloop loop benchmark: {args.runs} runs x {len(SCRIPT)} steps, scripted zero-latency LLM on loopback")
    print(line("loop overhead per step", overhead))
    print(line("  step total", step_ms))
    print(line("  LLM round trip (in loop)", llm_ms))
    print(line("  tool time (in loop)", tool_ms))
    print(line("baseline: bare HTTP round trip", bare_http))
    print(line("baseline: bare manual lookup", bare_tool))
    print(
        f"overhead p95 / bare HTTP p95: {pct(overhead, 0.95) / pct(bare_http, 0.95):.2f}x   "
        f"target overhead p95 <= 15 ms: {'met' if pct(overhead, 0.95) <= 15 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
