"""The tool contract: validation, whitelisting, timeouts, the envelope and the generated views."""

from __future__ import annotations

import json
import time
from typing import ClassVar

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from edge.agent import build_registry
from tools.contract import Item, Tool, ToolContext, ToolOutput
from tools.observation import TRUNCATION_MARKER, Observation, cut_middle
from tools.registry import ToolRegistry

CTX = ToolContext(request_id="req-1", run_id="run-1", loop_step=1)


class EchoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(description="fault code as printed on the HMI, e.g. E102", examples=["E102"])
    sleep_s: float = Field(default=0.0, ge=0, description="seconds to wait")


class VendorTool(Tool):
    """A device that sends more than we asked for, and sometimes hangs or breaks."""

    name: ClassVar[str] = "echo_vendor_reading"
    description: ClassVar[str] = "Echo a code."
    input_model = EchoArgs
    output_fields = frozenset({"code"})
    timeout_s = 0.3

    def run(self, args: EchoArgs, ctx: ToolContext) -> ToolOutput:
        # A hang of a few seconds: the registry gives up on the call after `timeout_s`, but no thread can be
        # stopped, and at exit Python waits for its pool's threads. Unbounded, a `sleep_s` hypothesis drew from
        # any integer kept the test run from ending after its last test had passed.
        time.sleep(min(args.sleep_s, 3.0))
        if args.code == "BOOM":
            raise RuntimeError("firmware said no")
        return ToolOutput(items=[Item(kind="ref", text="ok", fields={"code": args.code, "firmware_extra": 42})])


@pytest.fixture(scope="module")
def vendor_registry():
    registry = ToolRegistry([VendorTool()])
    yield registry
    registry.close()


def test_unknown_output_fields_are_dropped_not_fatal(vendor_registry):
    obs = vendor_registry.call("echo_vendor_reading", {"code": "E102"}, CTX, "obs-1")
    assert obs.status == "ok"
    assert obs.content[0].fields == {"code": "E102"}
    assert obs.dropped_fields == ["firmware_extra"]


def test_a_hanging_tool_becomes_a_timeout_observation(vendor_registry):
    started = time.perf_counter()
    obs = vendor_registry.call("echo_vendor_reading", {"code": "E1", "sleep_s": 2}, CTX, "obs-1")
    assert time.perf_counter() - started < 1.0
    assert obs.status == "error" and obs.error_code == "timeout" and obs.suggestion


def test_a_crashing_tool_becomes_an_error_observation(vendor_registry):
    obs = vendor_registry.call("echo_vendor_reading", {"code": "BOOM"}, CTX, "obs-1")
    assert obs.error_code == "tool_failed" and "firmware said no" in obs.content[0].text


@pytest.mark.parametrize(
    "args, field",
    [
        ({}, "code"),
        ({"code": 7}, "code"),
        ({"code": "E1", "colour": "red"}, "colour"),
        ({"code": "E1", "sleep_s": -1}, "sleep_s"),
    ],
)
def test_invalid_arguments_name_the_field_the_reason_and_a_hint(vendor_registry, args, field):
    obs = vendor_registry.call("echo_vendor_reading", args, CTX, "obs-1")
    assert obs.error_code == "invalid_arguments"
    assert repr(field) in obs.content[0].text and field in obs.suggestion


def test_non_object_arguments_get_an_example(vendor_registry):
    obs = vendor_registry.call("echo_vendor_reading", ["E102"], CTX, "obs-1")
    assert obs.error_code == "invalid_arguments" and "E102" in obs.suggestion


@settings(max_examples=150, deadline=None)
@given(
    args=st.one_of(
        st.dictionaries(
            st.sampled_from(["code", "sleep_s", "x"]),
            st.one_of(st.none(), st.integers(), st.text(max_size=5), st.floats(0, 0.01)),
        ),
        st.lists(st.integers(), max_size=2),
        st.text(max_size=5),
    )
)
def test_any_arguments_give_an_observation_never_an_exception(vendor_registry, args):
    obs = vendor_registry.call("echo_vendor_reading", args, CTX, "obs-1")
    assert obs.status in ("ok", "error")
    if obs.status == "error":
        assert obs.error_code and obs.suggestion


def test_registry_views_come_from_the_tools(agent_config):
    registry = build_registry(agent_config)
    try:
        listing = registry.prompt_tool_list()
        assert [line.split(".")[0] for line in listing.splitlines() if not line.startswith(" ")] == ["1", "2", "3"]
        for tool in registry:
            assert f". {tool.name}: " in listing and tool.name in registry.docs_markdown()
        assert "E102" in listing  # format hints live in the schema descriptions
        schema = registry.action_schema()
        jsonschema.validate(
            {
                "thought": "t",
                "action": "read_plc_sensor_value",
                "args": {"device_id": "press-3", "sensor": "coolant_level"},
            },
            schema,
        )
        jsonschema.validate({"thought": "t", "final_answer": "done", "evidence": ["obs-1"]}, schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"thought": "t", "action": "read_plc_sensor", "args": {}}, schema)
        side_effects = {tool.name for tool in registry if tool.side_effect}
        assert side_effects == {"generate_work_order"}
    finally:
        registry.close()


@given(text=st.text(min_size=0, max_size=3000), limit=st.integers(min_value=60, max_value=2000))
def test_long_content_is_cut_head_and_tail_with_a_marker(text, limit):
    cut = cut_middle(text, limit)
    if len(text) <= limit:
        assert cut == text
    else:
        assert len(cut) <= limit
        marker_start = cut.index("[… ")
        assert text.startswith(cut[:marker_start])
        tail = cut[cut.index(" characters cut …]") + len(" characters cut …]") :]
        assert text.endswith(tail)


def test_envelope_fields():
    obs = Observation(
        id="obs-1",
        request_id="req-1",
        loop_step=2,
        tool="t",
        status="not_found",
        error_code=None,
        suggestion="describe the symptom",
    )
    payload = obs.payload()
    assert payload["status"] == "not_found" and payload["suggestion"] == "describe the symptom"
    assert obs.ts_ms > 1_700_000_000_000
    assert TRUNCATION_MARKER.format(n=424) in cut_middle("x" * 500, 100)


def test_every_tool_resolves_device_names_the_same_way(agent_config):
    registry = build_registry(agent_config)
    calls = {
        "search_maintenance_manual_by_fault_code": {"fault_code": "E102"},
        "read_plc_sensor_value": {"sensor": "coolant_level"},
        "generate_work_order": {"fault_code": "E102", "summary": "motor too hot"},
    }
    try:
        for tool, args in calls.items():
            for name in ("Press 3", "3号液压机"):
                obs = registry.call(tool, {**args, "device_id": name}, CTX, "obs-1")
                assert obs.error_code != "unknown_device", (tool, name)
            obs = registry.call(tool, {**args, "device_id": "press-9"}, CTX, "obs-1")
            assert obs.error_code == "unknown_device" and "press-3, cnc-7" in obs.content[0].text
    finally:
        registry.close()


def test_a_long_observation_is_rendered_as_valid_json_with_whole_items_dropped():
    items = [Item(kind="ref", text="E102", fields={"fault_code": "E102", "title": "Motor over-temperature"})]
    items += [Item(kind="step", text=f"Step {n}: " + "check the press " * 20, fields={"n": n}) for n in range(1, 30)]
    obs = Observation(
        id="obs-1", request_id="req-1", loop_step=1, tool="t", status="ok", content=items, suggestion="x" * 3000
    )
    for limit in (200, 600, 1800):
        rendered = obs.render(limit)
        payload = json.loads(rendered)
        assert len(rendered) <= limit and obs.truncated
        kept = payload["content"]
        assert payload["omitted_items"] == len(items) - len(kept)
        if kept:
            assert kept[0]["fault_code"] == "E102"  # the code and title lead and stay
    assert obs.render(100_000) == obs.payload_json() and not obs.truncated
