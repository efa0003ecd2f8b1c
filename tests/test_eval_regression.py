"""CI's regression gate: the project's cases through the rules planner must not score below the recorded baseline.

Runs `fixloop eval tests/eval/cases.jsonl --json --baseline tests/eval/baseline.json`
as CI does, in its own process, on the demo plant (PLC simulator in-process,
fresh work-order store). After a deliberate improvement, record the new
baseline with `fixloop eval tests/eval/cases.jsonl --write-baseline tests/eval/baseline.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from edge.evaluation.cases import load_cases
from edge.evaluation.summary import load_baseline

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "eval" / "cases.jsonl"
BASELINE = ROOT / "tests" / "eval" / "baseline.json"


def test_the_rules_planner_scores_at_least_the_baseline(ops_state):
    env = {key: value for key, value in os.environ.items() if not key.startswith("FIXLOOP")}
    env.update(FIXLOOP_STATE_DIR=str(ops_state), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-m", "edge.cli.main", "eval", str(CASES), "--json", "--baseline", str(BASELINE)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.stdout, done.stderr[-3000:]
    report = json.loads(done.stdout)
    baseline = load_baseline(BASELINE)
    summary = report["summary"]
    below = {name: (summary["metrics"][name]["rate"], floor) for name, floor in baseline.scores.items()
             if (summary["metrics"][name]["rate"] or 0.0) < floor - 1e-9}
    assert not below, f"scores below the baseline (now, baseline): {below}; {report['regressions']}"
    assert done.returncode == 0 and report["regressions"] == []

    cases = load_cases(CASES)
    assert [c["case"]["id"] for c in report["cases"]] == [case.id for case in cases]
    assert report["planner"] == "rules" and report["llm_url"] is None and summary["planners"] == ["rules"]
    assert report["index"] == str((ops_state / "manuals.sqlite").resolve()) and not report["index_built"]
    for case in report["cases"]:
        assert case["error"] is None, f"{case['case']['id']} crashed: {case['error']}"
        record = case["record"]
        assert record["termination"]["final_answer"] and record["steps"], case["case"]["id"]
        assert len(case["session_runs"]) == len(case["case"]["session"])
        assert {"first_tool", "grounded", "steps", "tokens", "latency_ms", "problems"} <= set(case["score"])
    # Every answer the rules planner writes comes from observations: this one must never regress.
    assert summary["metrics"]["grounded"]["rate"] == 1.0
