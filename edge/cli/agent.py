"""`fixloop ask` and `fixloop tools`."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.markup import escape

from edge.cli.errors import CliError
from edge.cli.options import json_option
from edge.cli.terminal import console
from edge.config import Config
from edge.run import RunRecord
from tools.text_fields import BlankText, stored_text

STATUS_STYLE = {"ok": "green", "not_found": "yellow", "degraded": "yellow", "error": "red"}


def register(subparsers: argparse._SubParsersAction) -> None:
    ask = subparsers.add_parser("ask", help="ask one question and print the answer with its trace")
    ask.add_argument("question")
    ask.add_argument("--device", help="device id, e.g. press-3 (else found in the question)")
    json_option(ask, help="print the whole run record as JSON")
    ask.set_defaults(func=run_ask)

    tools = subparsers.add_parser("tools", help="print the tool contract generated from the registry")
    tools.add_argument("--format", choices=["markdown", "prompt", "schema"], default="markdown")
    tools.set_defaults(func=run_tools)


def run_ask(args: argparse.Namespace, config: Config) -> int:
    from edge.agent import Agent
    from edge.manual_index import ensure_index
    from knowledge.search import IndexMissing
    from tools.plant import UnknownDevice

    try:
        question = stored_text(args.question)
    except BlankText as exc:
        raise CliError(f"question {exc}") from None
    ensure_index(config)
    agent = Agent(config)
    try:
        # A one-shot command has no background to warm in: what this question needs loads now (the SBERT
        # model for a symptom; nothing for a fault code, which is an exact lookup).
        agent.warm_for(question, args.device, actor="operator")
        record = agent.ask(question, device_id=args.device, actor="operator")
    except (UnknownDevice, IndexMissing) as exc:  # IndexMissing: there, but unreadable or embedded with another model
        raise CliError(str(exc)) from None
    finally:
        agent.close()
    if args.json:
        print(record.model_dump_json(indent=2))
    else:
        print_trace(record, console())
    return 0


def print_trace(record: RunRecord, console: Console) -> None:
    """Each step with the planner that took it; where the model handed the run over, and why. What the model
    and the tools wrote is shown as text, never read as markup (`edge.cli.terminal.console` shows any
    control character in it)."""
    previous = None
    for step in record.steps:
        if previous is not None and step.planner != previous:
            console.print(
                f"[yellow]handed over to the {step.planner} planner:[/] {escape(record.fallback or 'fallback')}"
            )
        previous = step.planner
        tag = f"[dim]{step.n} {step.planner}{f' ({step.decided_by})' if step.decided_by else ''}[/]"
        if step.why:
            console.print(f"{tag} [dim]decided by the {step.decided_by or step.planner}: {escape(step.why)}[/]")
        if step.format_error:
            console.print(f"{tag} [red]format error[/] {escape(step.format_error)}")
            continue
        if step.thought:
            console.print(f"{tag} [dim]thought:[/] {escape(step.thought)}")
        if step.action:
            console.print(f"{tag} [bold]{escape(step.action)}[/] {escape(json.dumps(step.args, ensure_ascii=False))}")
        if step.observation:
            obs = step.observation
            style = STATUS_STYLE.get(obs.status, "white")
            console.print(
                f"   [{style}]{obs.status}[/] from {escape(obs.source)} ({obs.elapsed_ms:.0f} ms)"
                + (f" — {escape(obs.suggestion)}" if obs.suggestion else "")
            )
    for warning in record.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    term = record.termination
    if term:
        console.rule("answer")
        console.print(term.final_answer, markup=False, highlight=False)
        console.rule()
        console.print(
            f"[dim]run {record.run_id} · planner {record.planner} · {len(record.steps)} steps · "
            f"{record.elapsed_ms:.0f} ms · stop: {term.reason} · confidence {term.confidence:.2f} · "
            f"evidence {', '.join(term.supporting_observations) or '-'}[/]"
        )


def run_tools(args: argparse.Namespace, config: Config) -> int:
    from edge.agent import build_registry

    registry = build_registry(config)
    try:
        if args.format == "markdown":
            print(registry.docs_markdown())
        elif args.format == "prompt":
            print(registry.prompt_tool_list())
        else:
            print(json.dumps(registry.action_schema(), indent=2, ensure_ascii=False))
    finally:
        registry.close()
    return 0
