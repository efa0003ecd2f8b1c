"""`fixloop doctor` against the demo plant (PLC up, down, breakers, a broken sensor), the index, and LLM servers."""

from __future__ import annotations

import json
import socket
import sqlite3

import pytest

from edge.cli.main import main
from edge.config import Config, load_config
from edge.doctor import Check, failed, run_checks
from knowledge.ingest.build import SCHEMA_VERSION
from tests.fixtures.ops import schema_honouring, schema_ignoring
from tools.plc import breaker_states
from tools.plc.store import PlcStore


@pytest.fixture
def demo_config(ops_state, plant_devices) -> Config:
    config = load_config(env={"FIXLOOP_STATE_DIR": str(ops_state)})
    return config.model_copy(
        update={"devices": plant_devices, "plc": config.plc.model_copy(update={"read_budget_ms": 250})}
    )


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {check.name: check for check in checks}


def with_llm(config: Config, **llm) -> Config:
    return config.model_copy(update={"llm": config.llm.model_copy(update=llm)})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_demo_box_with_plc_up_and_no_llm_is_ready_in_degraded_mode(ops_state, plc_sim, monkeypatch, capsys):
    monkeypatch.setenv("FIXLOOP_STATE_DIR", str(ops_state))
    monkeypatch.delenv("FIXLOOP_LLM_URL", raising=False)
    for device in ("press-3", "cnc-7"):
        monkeypatch.setenv(f"FIXLOOP__DEVICES__{device.upper()}__PLC__PORT", str(plc_sim.port))

    assert main(["doctor", "--json"]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert [checks[n]["status"] for n in ("index", "plc press-3", "plc cnc-7", "llm")] == ["ok", "ok", "ok", "notice"]
    assert "degraded rules mode" in checks["llm"]["detail"] and "FIXLOOP_LLM_URL" in checks["llm"]["fix"]
    assert "5/5 sensors read" in checks["plc press-3"]["detail"]
    assert (
        "records from 8 manual(s)" in checks["index"]["detail"]
        and f"index schema {SCHEMA_VERSION}" in checks["index"]["detail"]
    )
    assert checks["config"]["status"] == "notice" and "demo tokens" in checks["config"]["detail"]

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "ready: 0 failure(s)" in out and "degraded rules mode" in out


def test_a_silent_plc_is_a_failure_naming_the_device_and_the_fix(demo_config, plc_sim):
    plc_sim.silence("press-3")
    checks = by_name(run_checks(demo_config))
    assert checks["plc press-3"].status == "failure" and "no answer (timeout" in checks["plc press-3"].detail
    assert "[devices.press-3.plc]" in checks["plc press-3"].fix
    assert checks["plc cnc-7"].status == "ok"


def test_no_plc_at_all_fails_every_device_and_the_cli_exits_non_zero(ops_state, monkeypatch, capsys):
    monkeypatch.setenv("FIXLOOP_STATE_DIR", str(ops_state))
    port = free_port()
    for device in ("press-3", "cnc-7"):
        monkeypatch.setenv(f"FIXLOOP__DEVICES__{device.upper()}__PLC__PORT", str(port))
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "not ready: 2 failure(s)" in out and "cannot connect" in out


def test_open_breakers_and_a_broken_sensor_are_warnings(demo_config, plc_sim):
    store = PlcStore(demo_config.state_path(demo_config.plc.cache_file))
    for _ in range(3):
        store.count_failure("press-3", "*", demo_config.plc.breaker_threshold, 1_800_000_000_000)
    store.count_failure("cnc-7", "vibration", demo_config.plc.breaker_threshold, 1_800_000_000_000)
    store.close()
    plc_sim.set_value("cnc-7", "spindle_temp", 400)

    checks = by_name(run_checks(demo_config))
    assert checks["plc breakers"].status == "warning"
    assert "press-3/whole unit open after 3 failures" in checks["plc breakers"].detail
    assert "vibration" not in checks["plc breakers"].detail
    assert checks["plc cnc-7"].status == "warning" and "spindle_temp reads 400" in checks["plc cnc-7"].detail
    assert not failed(list(checks.values()))


def test_checking_a_silent_plc_counts_no_breaker_and_an_unused_state_dir_stays_absent(
    demo_config, ops_state, plc_sim, tmp_path
):
    plc_sim.silence("press-3")
    unused = tmp_path / "not-yet"
    index = ops_state / "manuals.sqlite"
    fresh = demo_config.model_copy(
        update={
            "state_dir": str(unused),
            "knowledge": demo_config.knowledge.model_copy(update={"index_file": str(index)}),
        }
    )
    for _ in range(demo_config.plc.breaker_threshold + 1):
        checks = by_name(run_checks(fresh))
    assert checks["plc press-3"].status == "failure" and checks["index"].status == "ok"
    assert checks["plc breakers"].status == "notice" and not unused.exists()

    PlcStore(demo_config.state_path(demo_config.plc.cache_file)).close()
    for _ in range(demo_config.plc.breaker_threshold + 1):
        checks = by_name(run_checks(demo_config))
    assert checks["plc press-3"].status == "failure" and checks["plc breakers"].detail.endswith("all closed")
    assert breaker_states(demo_config.plc, demo_config.state_path(demo_config.plc.cache_file)) == []


def test_an_index_from_another_fixloop_version_is_a_failure_saying_to_rebuild(demo_config, ops_state):
    con = sqlite3.connect(ops_state / "manuals.sqlite")
    with con:
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    con.close()
    check = by_name(run_checks(demo_config))["index"]
    assert check.status == "failure" and f"index schema 2, this fixloop reads {SCHEMA_VERSION}" in check.detail
    assert check.fix.startswith("rebuild the index with this version")


def test_a_missing_index_is_a_failure_saying_how_to_build_it(demo_config, ops_state):
    (ops_state / "manuals.sqlite").unlink()
    check = by_name(run_checks(demo_config))["index"]
    assert check.status == "failure" and "no manual index at" in check.detail and "fixloop index build" in check.fix


def test_an_index_from_another_embedding_model_is_a_failure(demo_config):
    config = demo_config.model_copy(
        update={"knowledge": demo_config.knowledge.model_copy(update={"model_path": "/models/other"})}
    )
    check = by_name(run_checks(config))["index"]
    assert check.status == "failure" and "/models/other" in check.detail


def test_a_server_that_honours_structured_outputs_passes_in_each_mode(demo_config, llm_server):
    server = llm_server(schema_honouring)
    for mode in ("structured_outputs", "response_format", "guided_json"):
        checks = by_name(run_checks(with_llm(demo_config, url=server.url, structured_outputs=mode)))
        assert [checks[n].status for n in ("llm", "llm model", "llm structured outputs")] == ["ok", "ok", "ok"], mode
        assert f"honoured ({mode})" in checks["llm structured outputs"].detail
    probe = server.requests[0]
    assert probe["structured_outputs"]["json"]["properties"]["status"]["enum"] == ["ok"]
    assert probe["max_tokens"] <= 16


def test_a_server_that_ignores_the_schema_is_flagged(demo_config, llm_server):
    server = llm_server(schema_ignoring)
    checks = by_name(run_checks(with_llm(demo_config, url=server.url)))
    check = checks["llm structured outputs"]
    assert check.status == "failure" and "ignored the JSON Schema" in check.detail and "unconstrained" in check.detail
    assert "response_format" in check.fix and failed(list(checks.values()))


def test_a_different_served_model_fails_and_an_unconfirmed_revision_warns(demo_config, llm_server):
    other = llm_server(schema_honouring, model="Qwen/Qwen2-7B-Instruct-GPTQ-Int4")
    check = by_name(run_checks(with_llm(demo_config, url=other.url)))["llm model"]
    assert (
        check.status == "failure" and "Qwen2-7B-Instruct-GPTQ-Int4" in check.detail and "FIXLOOP_LLM_MODEL" in check.fix
    )

    pinned = llm_server(schema_honouring)
    revision = "a" * 40
    check = by_name(run_checks(with_llm(demo_config, url=pinned.url, revision=revision)))["llm model"]
    assert check.status == "warning" and revision in check.detail and "does not report a revision" in check.detail


def test_an_unreachable_llm_is_a_failure(demo_config):
    checks = run_checks(with_llm(demo_config, url=f"http://127.0.0.1:{free_port()}/v1", timeout_s=1.0))
    check = by_name(checks)["llm"]
    assert check.status == "failure" and "unreachable" in check.detail and "fixloop-vllm" in check.fix
    assert "llm model" not in by_name(checks)


def test_disabled_structured_outputs_is_a_warning(demo_config, llm_server):
    server = llm_server(schema_honouring)
    check = by_name(run_checks(with_llm(demo_config, url=server.url, structured_outputs="none")))[
        "llm structured outputs"
    ]
    assert check.status == "warning" and not server.requests


def _routes_by_rule(body: dict) -> dict:
    """Honours the schema; asked as the run's planner, picks the first tool a trigger rule would."""
    if "messages" in body and body["messages"][0]["content"].startswith("You are fixloop"):
        question = body["messages"][1]["content"]
        if "right now" in question:
            args = {"device_id": "press-3", "sensor": "motor_temp"}
            return {"content": json.dumps({"thought": "a value", "action": "read_plc_sensor_value", "args": args})}
        args = {"query": "grinding noise"}
        return {
            "content": json.dumps({"thought": "t", "action": "search_maintenance_manual_by_fault_code", "args": args})
        }
    return schema_honouring(body)


def test_the_routing_probe_says_plainly_when_the_model_plans_worse_than_the_rules(demo_config, llm_server):
    good = llm_server(_routes_by_rule)
    check = by_name(run_checks(with_llm(demo_config, url=good.url)))["llm routing"]
    assert check.status == "ok" and "routes as well as the rules" in check.detail

    # A server that answers every question with the same JSON: no tool at all.
    poor = llm_server(schema_honouring)
    check = by_name(run_checks(with_llm(demo_config, url=poor.url)))["llm routing"]
    assert check.status == "warning" and "plans worse than the rules" in check.detail
    assert "only for the answer's prose" in check.detail and "planning prose" in check.detail
