"""The service under load and at start-up, against a scripted LLM that takes 300 ms per step.

Measured on a real `fixloop serve` process (its own interpreter, as in production):
- start-up: from process start to /readyz answering ready, and to the first answered question;
- load: 16 concurrent sessions asking back to back vs. one session alone, in the same run:
  errors, runs lost (streamed but not stored), p50/p95 per run and the ratio of the p95s,
  time to the first streamed event;
- memory: the service's resident set size (from /proc) at ready, after the SBERT model has warmed,
  and at its peak under load.
Targets: ready <= 3 s, p95 under load <= 1.3x a single session's, no errors, nothing lost, RSS <= 1.5 GB.

Every conversation follows the same script: manual search, PLC read, final answer (3 LLM steps).

    python scripts/bench_service.py [--sessions 16] [--runs 5] [--step-delay 0.3]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from importlib import resources
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from bench_support import free_port, pct, rss_mb

from edge.config import load_config
from edge.llm.scripted_server import ScriptedLlmServer
from knowledge.demo import build_demo_index
from tools.plc.simulator import start_simulator

TOKEN = "bench-technician-token"
QUESTION = "Press-3 shows E102, what should I do?"


def script(delay_s: float) -> list[dict]:
    def step(obj: dict) -> dict:
        return {"content": json.dumps(obj), "delay_s": delay_s}

    return [
        step(
            {
                "thought": "A fault code: the manual first.",
                "action": "search_maintenance_manual_by_fault_code",
                "args": {"fault_code": "E102", "device_id": "press-3"},
            }
        ),
        step(
            {
                "thought": "The manual asks for the coolant level.",
                "action": "read_plc_sensor_value",
                "args": {"device_id": "press-3", "sensor": "coolant_level"},
            }
        ),
        step(
            {
                "thought": "Done.",
                "final_answer": "Stop the press and check the coolant level.",
                "evidence": ["obs-1", "obs-2"],
            }
        ),
    ]


class RssSampler:
    def __init__(self, pid: int, interval_s: float = 0.05):
        self.pid, self.interval_s, self.peak = pid, interval_s, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def ask(client: httpx.Client, session_id: str | None) -> dict:
    """One run through the stream: total time, time to the first event, and whether it ended well."""
    started = time.perf_counter()
    first = None
    stored = termination = None
    body = {"question": QUESTION, "device_id": "press-3", "session_id": session_id}
    with client.stream("POST", "/v1/runs", json=body) as response:
        if response.status_code != 200:
            response.read()
            return {"ok": False, "error": f"HTTP {response.status_code}: {response.text[:200]}"}
        run_id = response.headers["x-run-id"]
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            first = first if first is not None else time.perf_counter() - started
            event = json.loads(line[5:])
            if event["type"] == "termination":
                termination = event["termination"]["reason"]
            elif event["type"] == "stored":
                stored = event["run_id"]
            elif event["type"] == "error":
                return {"ok": False, "error": event["error"], "run_id": run_id}
    elapsed = time.perf_counter() - started
    ok = stored == run_id and termination == "final_answer"
    return {
        "ok": ok,
        "run_id": run_id,
        "elapsed_s": elapsed,
        "first_event_s": first,
        "error": None if ok else f"termination {termination}, stored {stored}",
    }


def session(url: str, runs: int, name: str) -> list[dict]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client:
        return [ask(client, f"bench-{name}") for _ in range(runs)]


def figures(results: list[dict]) -> tuple[list[float], list[float]]:
    good = [r for r in results if r["ok"]]
    return [r["elapsed_s"] * 1000 for r in good], [r["first_event_s"] * 1000 for r in good]


def line(name: str, values: list[float]) -> str:
    return (
        f"{name:<36} p50 {statistics.median(values):7.0f} ms   p95 {pct(values, 0.95):7.0f} ms   "
        f"max {max(values):7.0f} ms   n={len(values)}"
    )


def write_config(state: Path, plc_port: int, service_port: int, llm_url: str) -> Path:
    text = resources.files("edge").joinpath("demo.toml").read_text(encoding="utf-8")
    text = text.replace("port = 15020", f"port = {plc_port}").replace("port = 8080", f"port = {service_port}")
    text = text.replace('technician_tokens = ["demo-technician-token"]', f'technician_tokens = ["{TOKEN}"]')
    text = text.replace("[llm]\n", f'[llm]\nurl = "{llm_url}"\n', 1)
    path = state / "bench.toml"
    path.write_text(text, encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--runs", type=int, default=5, help="questions per session (back to back)")
    parser.add_argument("--step-delay", type=float, default=0.3, help="scripted LLM time per step, seconds")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, ScriptedLlmServer(script(args.step_delay)) as llm:
        state = Path(tmp)
        print("building the demo index…", flush=True)
        build_demo_index(state)
        plc_port, port = free_port(), free_port()
        config_path = write_config(state, plc_port, port, llm.url)
        sim = start_simulator(load_config(config_path, env={}).devices, "127.0.0.1", plc_port)
        env = {
            **os.environ,
            "FIXLOOP_CONFIG": str(config_path),
            "FIXLOOP_STATE_DIR": str(state),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        url = f"http://127.0.0.1:{port}"

        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "edge.cli.main", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            ready_s, ready_report = wait_ready(url, proc, started)
            rss_ready = rss_mb(proc.pid)
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client:
                first = ask(client, None)
            first_answer_s = time.perf_counter() - started
            warm_s = wait_warm(url, started)
            rss_warm = rss_mb(proc.pid)

            single = session(url, args.runs * 2, "single")
            with RssSampler(proc.pid) as sampler, concurrent.futures.ThreadPoolExecutor(args.sessions) as pool:
                load_started = time.perf_counter()
                batches = list(pool.map(lambda n: session(url, args.runs, f"load-{n}"), range(args.sessions)))
                load_s = time.perf_counter() - load_started
            loaded = [r for batch in batches for r in batch]

            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client:
                lost = [
                    r["run_id"]
                    for r in loaded
                    if r.get("run_id") and client.get(f"/v1/runs/{r['run_id']}").status_code != 200
                ]
        finally:
            proc.terminate()
            proc.wait(timeout=20)
            sim.stop()

    single_ms, single_first = figures(single)
    load_ms, load_first = figures(loaded)
    errors = [r["error"] for r in single + loaded if not r["ok"]]
    ratio = pct(load_ms, 0.95) / pct(single_ms, 0.95)

    print(f"\nscripted LLM: {args.step_delay * 1000:.0f} ms per step, 3 steps per run (manual, PLC, answer)")
    print("start-up (fixloop serve, own process)")
    print(
        f"  process start -> /readyz ready       {ready_s:6.2f} s   (target <= 3 s; still warming then: "
        f"{', '.join(ready_report['warming']) or 'nothing'})"
    )
    print(
        f"  process start -> first answer         {first_answer_s:6.2f} s   (first run {first.get('elapsed_s', 0):.2f} s, "
        f"first event after {1000 * (first.get('first_event_s') or 0):.0f} ms)"
    )
    print(f"  process start -> SBERT model warm     {warm_s:6.2f} s")
    print(f"load: {args.sessions} concurrent sessions x {args.runs} runs vs 1 session x {args.runs * 2} runs")
    print("  " + line("single session, per run", single_ms))
    print("  " + line(f"{args.sessions} sessions, per run", load_ms))
    print("  " + line("single session, first event", single_first))
    print("  " + line(f"{args.sessions} sessions, first event", load_first))
    print(f"  p95 ratio (load / single)            {ratio:6.2f}x  (target <= 1.3x)")
    print(f"  throughput under load                {len(loaded) / load_s:6.1f} runs/s")
    print(f"  errors {len(errors)}   lost {len(lost)}   runs {len(single) + len(loaded)}")
    for error in errors[:5]:
        print(f"    error: {error}")
    print("memory (VmRSS of the service process)")
    print(
        f"  at ready {rss_ready:6.0f} MB   model warm {rss_warm:6.0f} MB   peak under load {sampler.peak:6.0f} MB"
        f"   (target <= 1536 MB)"
    )


def wait_ready(url: str, proc: subprocess.Popen, started: float, timeout_s: float = 60) -> tuple[float, dict]:
    while time.perf_counter() - started < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(f"fixloop serve exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            response = httpx.get(f"{url}/readyz", timeout=1)
            if response.status_code == 200:
                return time.perf_counter() - started, response.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    raise SystemExit(f"fixloop serve not ready after {timeout_s} s")


def wait_warm(url: str, started: float, timeout_s: float = 120) -> float:
    while time.perf_counter() - started < timeout_s:
        if not httpx.get(f"{url}/readyz", timeout=2).json()["warming"]:
            return time.perf_counter() - started
        time.sleep(0.1)
    raise SystemExit("the SBERT model did not warm within the timeout")


if __name__ == "__main__":
    main()
