"""CI's regression gate: the project's case sets through the rules planner must not score below their baselines.

Runs `fixloop eval tests/eval/cases.jsonl --json --baseline tests/eval/baseline.json`
(and the same for tests/eval/phrasing.jsonl, questions as technicians type them, against
tests/eval/phrasing_baseline.json, for tests/eval/phrasing_fresh.jsonl, questions written before
the rules that answer them, against tests/eval/phrasing_fresh_baseline.json, and for
tests/eval/phrasing_heldout.jsonl, a second such set on the rules' recurring misroutes, against
tests/eval/phrasing_heldout_baseline.json) as CI does, in its own
process, on the demo plant (PLC simulator in-process, fresh work-order store). After a deliberate
improvement, record the new baseline with
`fixloop eval tests/eval/cases.jsonl --write-baseline tests/eval/baseline.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edge.evaluation.cases import load_cases
from edge.evaluation.summary import load_baseline

ROOT = Path(__file__).resolve().parent.parent
EVAL = ROOT / "tests" / "eval"
SETS = [
    (EVAL / "cases.jsonl", EVAL / "baseline.json"),
    (EVAL / "phrasing.jsonl", EVAL / "phrasing_baseline.json"),
    (EVAL / "phrasing_fresh.jsonl", EVAL / "phrasing_fresh_baseline.json"),
    (EVAL / "phrasing_heldout.jsonl", EVAL / "phrasing_heldout_baseline.json"),
]


@pytest.mark.parametrize("cases_file, baseline_file", SETS, ids=[cases.stem for cases, _ in SETS])
def test_the_rules_planner_scores_at_least_the_baseline(ops_state, cases_file, baseline_file):
    env = {key: value for key, value in os.environ.items() if not key.startswith("FIXLOOP")}
    env.update(FIXLOOP_STATE_DIR=str(ops_state), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-m", "edge.cli.main", "eval", str(cases_file), "--json", "--baseline", str(baseline_file)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout, done.stderr[-3000:]
    report = json.loads(done.stdout)
    baseline = load_baseline(baseline_file)
    summary = report["summary"]
    below = {
        name: (summary["metrics"][name]["rate"], floor)
        for name, floor in baseline.scores.items()
        if (summary["metrics"][name]["rate"] or 0.0) < floor - 1e-9
    }
    assert not below, f"scores below the baseline (now, baseline): {below}; {report['regressions']}"
    assert done.returncode == 0 and report["regressions"] == []

    cases = load_cases(cases_file)
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
