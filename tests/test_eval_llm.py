"""`fixloop eval` and `fixloop tokens` with an LLM URL set: the same command evaluates the model.

The model is the scripted OpenAI-compatible server over real HTTP, with the
real tools on the demo plant; one scripted answer is grounded, the other
invents a value and an order id, and the evaluation must tell them apart.
"""

from __future__ import annotations

import importlib
import itertools
import json

from edge.cli.main import main

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"


def reply(**content) -> dict:
    return {"content": json.dumps(content, ensure_ascii=False)}


SCRIPTS = {
    "Press-3 shows E102, what should I do?": [
        reply(
            thought="A fault code: the manual first.",
            action=MANUAL,
            args={"fault_code": "E102", "device_id": "press-3"},
        ),
        reply(
            thought="I have the procedure.",
            evidence=["obs-1"],
            final_answer="E102 is motor over-temperature protection (hydra_hp200_v2.1_en.pdf, V2.1, p. 2). "
            "1. Stop the press and switch the main motor off. 2. Check the coolant level.",
        ),
    ],
    "What is the coolant level on press-3 right now?": [
        reply(thought="A current value.", action=PLC, args={"device_id": "press-3", "sensor": "coolant_level"}),
        reply(
            thought="Answer.",
            evidence=["obs-1"],
            final_answer="The coolant level is 87.5 % and I opened work order WO-0123456789ABCDEF.",
        ),
    ],
}


def question_of(body: dict) -> str:
    return body["messages"][1]["content"].splitlines()[0].removeprefix("Question: ")


def script(body: dict) -> dict:
    question = question_of(body)
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    steps = SCRIPTS[question]
    return steps[min(turn, len(steps) - 1)]


def cases_file(tmp_path):
    path = tmp_path / "cases.jsonl"
    lines = [
        {
            "id": "llm-grounded",
            "question": "Press-3 shows E102, what should I do?",
            "device_id": "press-3",
            "expect": {"first_tool": MANUAL, "tools": [MANUAL], "fault_codes": ["E102"]},
        },
        {
            "id": "llm-invents",
            "question": "What is the coolant level on press-3 right now?",
            "expect": {"first_tool": PLC, "sensors": ["coolant_level"], "reading": "live"},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_eval_scores_the_model_and_catches_an_invented_value(tmp_path, ops_state, llm_server, monkeypatch, capsys):
    server = llm_server(script)
    monkeypatch.setenv("FIXLOOP_STATE_DIR", str(ops_state))
    monkeypatch.setenv("FIXLOOP_LLM_URL", server.url)
    monkeypatch.setenv("FIXLOOP__LLM__PLANNING", "model")  # the script is a model planning every step

    assert main(["eval", str(cases_file(tmp_path)), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)

    assert report["planner"] == "llm" and report["llm_url"] == server.url
    grounded, invents = report["cases"]
    assert grounded["score"]["passed"] and grounded["score"]["grounded"]
    assert grounded["record"]["planner"] == "llm" and grounded["score"]["tokens"] > 0
    assert grounded["record"]["steps"][1]["llm"]["shared_prefix_tokens"] > 0
    assert invents["score"]["sensor"] and invents["score"]["first_tool"]
    assert not invents["score"]["grounded"] and not invents["score"]["passed"]
    assert invents["score"]["ungrounded"] == ["work order WO-0123456789ABCDEF", "value 87.5"]
    assert report["summary"]["metrics"]["grounded"] == {"passed": 1, "applicable": 2, "rate": 0.5}
    assert len(server.requests) == 4


def test_eval_prints_the_runs_and_the_summary_table(tmp_path, ops_state, llm_server, monkeypatch, capsys):
    server = llm_server(script)
    monkeypatch.setenv("FIXLOOP_STATE_DIR", str(ops_state))
    monkeypatch.setenv("FIXLOOP_LLM_URL", server.url)
    monkeypatch.setenv("FIXLOOP__LLM__PLANNING", "model")  # the script is a model planning every step

    assert main(["eval", str(cases_file(tmp_path)), "--baseline", str(tmp_path / "none.json")]) == 2
    assert "baseline file not found" in capsys.readouterr().err

    (tmp_path / "high.json").write_text(
        json.dumps({"planner": "llm", "cases": 2, "scores": {"grounded": 1.0}, "passed_cases": ["llm-invents"]})
    )
    assert main(["eval", str(cases_file(tmp_path)), "--baseline", str(tmp_path / "high.json")]) == 1
    out = capsys.readouterr().out
    for text in (
        "PASS llm-grounded",
        "FAIL llm-invents",
        "not in any observation: work order WO-0123456789ABCDEF",
        "grounded",
        "1/2",
        "below the baseline",
        "grounded: 50.0% is below the baseline 100.0%",
        "passed in the baseline and fail now: llm-invents",
    ):
        assert text in out, text


def test_token_report_replays_the_cases_through_the_real_prompt(ops_state, monkeypatch, capsys):
    monkeypatch.setenv("FIXLOOP_STATE_DIR", str(ops_state))
    monkeypatch.delenv("FIXLOOP_LLM_URL", raising=False)
    cases = "tests/eval/cases.jsonl"
    assert main(["tokens", cases, "--only", "en-code-e102-press,zh-code-e102,en-sensor-coolant-now", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)

    assert report["estimated"] and "4 characters per token" in report["note"]
    tasks = {task["case_id"]: task for task in report["tasks"]}
    assert set(tasks) == {"en-code-e102-press", "zh-code-e102", "en-sensor-coolant-now"}
    for task in tasks.values():
        steps = task["steps"]
        assert steps[0]["shared_prefix_tokens"] == 0 and all(s["shared_prefix_tokens"] > 0 for s in steps[1:])
        # Appending steps keeps every earlier prompt as the next one's prefix.
        for earlier, later in itertools.pairwise(steps):
            assert later["shared_prefix_tokens"] <= earlier["prompt_tokens"] <= later["prompt_tokens"]
        assert task["context_tokens"] == steps[-1]["prompt_tokens"] + steps[-1]["completion_tokens"]
        assert task["uncached_tokens"] < task["processed_tokens"]
    assert len(tasks["en-sensor-coolant-now"]["steps"]) == 2
    assert report["context_max"] <= report["context_target"]

    assert main(["tokens", cases, "--only", "en-code-e102-press"]) == 0
    out = capsys.readouterr().out
    assert "stable prefix from step 2 on" in out and "estimated by the scripted server" in out


def test_bench_llm_puts_the_rules_and_the_model_on_each_set_in_one_table(tmp_path, llm_server, capsys):
    """scripts/bench_llm.py over two case sets: one table with a row per set and planner, the model's row
    beside the rules' pass count on the same cases, its answers and round trips counted from the records."""
    bench = importlib.import_module("scripts.bench_llm")
    prose = {
        "Press-3 shows E102, what should I do?": "Follow the manual entry's steps in order.",
        "What is the coolant level on press-3 right now?": "The coolant level of press-3 was read live.",
    }
    server = llm_server(
        lambda body: reply(thought="obs-1 answers it.", final_answer=prose[question_of(body)], evidence=["obs-1"])
    )
    codes, readings = tmp_path / "codes.jsonl", tmp_path / "readings.jsonl"
    codes.write_text(
        json.dumps(
            {
                "id": "c1",
                "question": "Press-3 shows E102, what should I do?",
                "tags": ["fault_code"],
                "expect": {"first_tool": MANUAL, "fault_codes": ["E102"]},
            }
        )
        + "\n",
        encoding="utf-8",
    )
    readings.write_text(
        json.dumps(
            {
                "id": "r1",
                "question": "What is the coolant level on press-3 right now?",
                "tags": ["sensor"],
                "expect": {"first_tool": PLC, "sensors": ["coolant_level"], "reading": "live"},
            }
        )
        + "\n",
        encoding="utf-8",
    )
    records = tmp_path / "records.jsonl"
    argv = ["--url", server.url, "--model", "scripted", "--concurrency", "1", "--records", str(records)]
    assert bench.main([*argv, "--cases", str(codes), "--cases", str(readings)]) == 0
    out = capsys.readouterr().out

    table = out[out.index("every set, every planner") :].splitlines()[2:]
    rows = {(cells[0], cells[1]): cells for cells in (line.split() for line in table if line.strip())}
    assert set(rows) == {("codes", "rules"), ("codes", "scripted"), ("readings", "rules"), ("readings", "scripted")}
    stored = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(stored) == 2 and len(server.requests) >= 2
    for (set_name, planner), cells in rows.items():
        assert cells[2 if planner == "rules" else 3] == "1/1", (set_name, planner, cells)  # passed
    # One request per run: the rules took the certain steps, the model wrote the prose it was asked for.
    for record in stored:
        assert [s["decided_by"] for s in record["steps"]][-1] == "model"
        assert sum(s["llm"] is not None for s in record["steps"]) == 1
