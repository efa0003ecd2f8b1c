"""Issue 11's targets against a misbehaving model: invented facts shown, runs within budget, the baseline.

Runs every scenario of `edge.evaluation.adversarial` (a scripted OpenAI-compatible
server over real HTTP that invents facts, replies unreadably, trickles bytes…)
on the demo plant, then the regression set through the rules planner, and prints:
- invented facts shown to the technician (target 0), and facts without evidence;
- runs within the wall budget + 0.5 s, and run wall time p50 / p95 / max against the budget;
- runs whose record does not say what happened;
- `fixloop eval tests/eval/cases.jsonl --baseline tests/eval/baseline.json`: passed cases, grounded rate,
  regressions (target: none).

    python scripts/bench_adversarial.py [--repeat 3] [--skip-eval]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_support import pct  # noqa: E402

from edge.config import load_config  # noqa: E402
from edge.evaluation.adversarial import BUDGET_SLACK_S, SCENARIOS, ScenarioResult, run_scenario  # noqa: E402
from edge.evaluation.plant import EvalPlant  # noqa: E402

CASES = ROOT / "tests" / "eval" / "cases.jsonl"
BASELINE = ROOT / "tests" / "eval" / "baseline.json"


def run_scenarios(repeat: int) -> list[ScenarioResult]:
    results = []
    with tempfile.TemporaryDirectory() as workdir:
        plant = EvalPlant(load_config(), Path(workdir))
        try:
            for scenario in SCENARIOS:
                for _ in range(repeat):
                    result = run_scenario(scenario, plant.config)
                    results.append(result)
                    mark = "ok  " if not result.problems else "FAIL"
                    print(
                        f"  {mark} {result.wall_s:5.2f} s  {scenario.name}"
                        + (f"  -> {'; '.join(result.problems)}" if result.problems else ""),
                        flush=True,
                    )
        finally:
            plant.close()
    return results


def report_scenarios(results: list[ScenarioResult]) -> bool:
    walls = [r.wall_s for r in results]
    budgets = sorted({r.budget_s for r in results})
    invented = sum(len(r.invented_shown) for r in results)
    unbacked = sum(len(r.unbacked) for r in results)
    within = sum(r.within_budget for r in results)
    unexplained = sum(
        1
        for r in results
        if any(
            p.startswith("record says") or "announced" in p or "raw reply" in p or "warning" in p for p in r.problems
        )
    )
    print()
    print(f"scenarios: {len(SCENARIOS)}, runs: {len(results)}")
    print(f"invented facts shown:              {invented}   (target 0)")
    print(f"facts without evidence shown:      {unbacked}   (target 0)")
    print(f"runs within budget + {BUDGET_SLACK_S} s:       {within}/{len(results)}   (target all)")
    print(
        f"run wall time:                     p50 {statistics.median(walls):.2f} s   p95 {pct(walls, 0.95):.2f} s   "
        f"max {max(walls):.2f} s   vs budget {', '.join(f'{b:g}' for b in budgets)} s"
    )
    print(f"records not saying what happened:  {unexplained}")
    return invented == 0 and unbacked == 0 and within == len(results) and unexplained == 0


def report_baseline() -> bool:
    env = {key: value for key, value in os.environ.items() if not key.startswith("FIXLOOP")}
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "edge.cli.main", "eval", str(CASES), "--json", "--baseline", str(BASELINE)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if not done.stdout:
        print(f"regression set: fixloop eval failed: {done.stderr[-2000:]}")
        return False
    report = json.loads(done.stdout)
    summary = report["summary"]
    passed = sum(1 for case in report["cases"] if case["score"]["passed"])
    grounded = summary["metrics"]["grounded"]["rate"]
    print(
        f"regression set ({CASES.relative_to(ROOT)}): {passed}/{len(report['cases'])} cases passed, "
        f"grounded {grounded:.3f}, regressions vs baseline: {report['regressions'] or 'none'}"
    )
    return done.returncode == 0 and not report["regressions"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario")
    parser.add_argument("--skip-eval", action="store_true", help="do not run the regression set")
    args = parser.parse_args()
    ok = report_scenarios(run_scenarios(args.repeat))
    if not args.skip_eval:
        ok = report_baseline() and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
