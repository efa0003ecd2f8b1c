"""Regression evaluation of the agent: cases, the evaluation plant, scoring, summary and the token report.

cases = load_cases("tests/eval/cases.jsonl", config.devices)
report = evaluate(config, cases, workdir)        # EvalReport: per-case records + scores, summary
regressions(report.summary, load_baseline("tests/eval/baseline.json"))
"""

from edge.evaluation.cases import CaseFileError, EvalCase, load_cases
from edge.evaluation.runner import CaseReport, EvalReport, evaluate
from edge.evaluation.scoring import CaseScore, score_case
from edge.evaluation.summary import Baseline, Summary, baseline_of, load_baseline, regressions, summarise
from edge.evaluation.tokens import TokenReport, measure_tokens
from edge.run import collect_evidence, ungrounded

__all__ = [
    "Baseline",
    "CaseFileError",
    "CaseReport",
    "CaseScore",
    "EvalCase",
    "EvalReport",
    "Summary",
    "TokenReport",
    "baseline_of",
    "collect_evidence",
    "evaluate",
    "load_baseline",
    "load_cases",
    "measure_tokens",
    "regressions",
    "score_case",
    "summarise",
    "ungrounded",
]
