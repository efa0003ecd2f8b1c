"""A cold CLI: wall time of one `fixloop` process per command, from start to exit.

Each command runs N times in a fresh interpreter (nothing warm but the OS page cache), against the
demo plant with its manual index already built (the first-use build is timed once, apart):
- `fixloop search E102`: an exact code lookup without the agent;
- `fixloop ask "<code question>"`: the whole agent with the rules planner (the demo PLCs are not
  running, so the readings fail fast, as on a box whose PLC is unplugged);
and, as the baseline measured in the same run, `python -c pass` (interpreter start-up) and
`python -c "import edge.cli.main"`. Printed: p50/p95/min wall, CPU (user + sys) p50, the p50 over
`python -c pass`, and which heavy packages each command imported (it should be none of them).
Target: both commands ≤ 1.5 s wall (p50) on the box the field report measured.

    python scripts/bench_cold_start.py [--runs 10] [--state-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Press-3 shows E102, what should I do?"
TARGET_S = 1.5
HEAVY = [
    "spacy",
    "thinc",
    "sentence_transformers",
    "transformers",
    "torch",
    "pymupdf",
    "onnxruntime",
    "fastapi",
    "uvicorn",
    "sqlite_utils",
]


def fixloop_command() -> list[str]:
    script = Path(sys.executable).parent / "fixloop"
    return [str(script)] if script.exists() else [sys.executable, "-m", "edge.cli.main"]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + sys, the child's) of one process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    """The heavy packages a command imports, run in-process in a fresh interpreter."""
    script = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from edge.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main({argv!r})
        print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))))
    """)
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[-1]) if done.returncode == 0 and done.stdout else ["(failed)"]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="cold runs per command (default 10)")
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="state directory with (or for) the demo index (default: a temporary one, built first)",
    )
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        state = args.state_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fixloop-cold-")))
        env = {key: value for key, value in os.environ.items() if not key.startswith("FIXLOOP")}
        env.update({"FIXLOOP_STATE_DIR": str(state), "HF_HUB_OFFLINE": "1"})
        fixloop = fixloop_command()

        if not (state / "manuals.sqlite").exists():
            wall, _ = timed([*fixloop, "ask", QUESTION], env)
            print(f"first use (demo index built, then answered): {wall:.1f} s")

        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import edge.cli.main'": [sys.executable, "-c", "import edge.cli.main"],
            "fixloop search E102": [*fixloop, "search", "E102"],
            f"fixloop ask {QUESTION!r}": [*fixloop, "ask", QUESTION],
        }
        in_process = {"fixloop search E102": ["search", "E102"], f"fixloop ask {QUESTION!r}": ["ask", QUESTION]}
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):  # interleaved, so a busy moment of the box hits every command alike
            for name, argv in commands.items():
                samples[name].append(timed(argv, env))

        base = statistics.median(wall for wall, _ in samples["python -c pass"])
        print(f"{args.runs} cold runs each · load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        print(f"{'command':<58} {'p50':>7} {'p95':>7} {'min':>7} {'cpu p50':>8} {'over start-up':>14}")
        for name, runs in samples.items():
            walls = [wall for wall, _ in runs]
            cpus = [cpu for _, cpu in runs]
            p50 = statistics.median(walls)
            print(
                f"{name:<58} {p50:>6.2f}s {percentile(walls, 0.95):>6.2f}s {min(walls):>6.2f}s "
                f"{statistics.median(cpus):>7.2f}s {p50 - base:>+13.2f}s"
            )
        for name, argv in in_process.items():
            p50 = statistics.median(wall for wall, _ in samples[name])
            verdict = "met" if p50 <= TARGET_S else "missed"
            loaded = heavy_imports(argv, env)
            print(
                f"{name}: p50 {p50:.2f} s, target ≤ {TARGET_S} s {verdict}; "
                f"heavy imports: {', '.join(loaded) or 'none'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
