"""The manual tool through the real registry, with the demo plant's devices."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from edge.config import load_config
from edge.run import build_document, render_text
from knowledge.ingest.build import build_index
from tools.contract import ToolContext
from tools.manual_search import ManualSearchTool
from tools.registry import ToolRegistry

TOOL = "search_maintenance_manual_by_fault_code"
CTX = ToolContext(request_id="r1", run_id="run1", loop_step=1)


@pytest.fixture(scope="module")
def registry(demo_index: Path):
    tool = ManualSearchTool(demo_index, load_config(env={}).devices, None)
    tool.warm()
    registry = ToolRegistry([tool])
    yield registry
    registry.close()


def call(registry, args):
    return registry.call(TOOL, args, CTX, "obs-1")


def test_code_on_a_device_gives_meaning_steps_and_citation(registry):
    obs = call(registry, {"fault_code": "E102", "device_id": "press-3"})
    assert obs.status == "ok" and obs.dropped_fields == [] and obs.confidence == 1.0
    ref, *items = obs.content
    steps = [item for item in items if item.kind == "step"]  # after the safety statements (test_knowledge_safety)
    assert ref.kind == "ref" and ref.fields["title"] == "Motor over-temperature protection"
    assert (ref.fields["manual"], ref.fields["page"], ref.fields["version"], ref.fields["match"]) == (
        "hydra_hp200_v2.1_en.pdf",
        2,
        "V2.1",
        "exact",
    )
    assert ref.fields["applies_to_device"] is True and "V1.2" in ref.fields["version_compatibility"]
    assert [s.fields["n"] for s in steps] == [1, 2, 3, 4, 5] and "coolant level" in steps[1].text
    assert obs.source == "hydra_hp200_v2.1_en.pdf p.2"


def test_symptom_query(registry):
    obs = call(registry, {"query": "the motor is hot", "device_id": "press-3"})
    assert obs.status == "ok" and obs.content[0].fields["fault_code"] == "E102"


def test_a_section_two_searches_found_is_shown_once_with_its_steps(registry):
    """A model's search words list E102 below another entry, without its steps; the rules' search by its
    code then returns it whole: the answer shows it once, in its first place, with the steps."""
    by_words = registry.call(TOOL, {"query": "motor", "device_id": "press-3"}, CTX, "obs-1")
    by_code = registry.call(TOOL, {"fault_code": "E102", "device_id": "press-3"}, CTX, "obs-2")
    assert [item.fields["fault_code"] for item in by_words.content if item.kind == "ref"][:2] == ["E101", "E102"]
    entries = build_document("press-3 motor trips", [by_words, by_code]).entries
    assert [entry.code for entry in entries] == ["E101", "E102", "DRV_FAULT"]
    assert entries[1].cited.observation == "obs-2" and len(entries[1].steps) == 5


def test_not_found_says_so_and_suggests(registry):
    obs = call(registry, {"fault_code": "E109", "device_id": "press-3"})
    assert obs.status == "not_found" and "E110" in obs.content[0].text and obs.suggestion


@pytest.mark.parametrize("args", [{}, {"fault_code": "E102", "query": "hot"}, {"fault_code": "  "}])
def test_exactly_one_of_code_or_query(registry, args):
    obs = call(registry, args)
    assert obs.status == "error" and obs.error_code == "invalid_arguments"


def test_unknown_device_lists_the_known_ones(registry):
    obs = call(registry, {"fault_code": "E102", "device_id": "press-9"})
    assert obs.error_code == "unknown_device" and "press-3, cnc-7" in obs.content[0].text


def test_schema_carries_the_code_formats():
    schema = ManualSearchTool.input_schema()
    assert "E102, F03, 6065, ALARM:1, Err-07, XX204, DRV_FAULT" in schema["properties"]["fault_code"]["description"]


def test_cold_start_answers_codes_without_the_model_and_symptoms_degraded(demo_index):
    """A fresh process: exact codes must not wait for SBERT; symptoms fall back to keywords until it loads."""
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from edge.config import load_config
        from tools.contract import ToolContext
        from tools.manual_search import ManualSearchTool
        tool = ManualSearchTool(Path({str(demo_index)!r}), load_config(env={{}}).devices, None)
        ctx = ToolContext(request_id="r", run_id="r", loop_step=1)
        code = tool.run(tool.input_model(fault_code="F03", device_id="press-3"), ctx)
        ready_after_code = tool.semantic_ready
        cold = tool.run(tool.input_model(query="the motor is hot", device_id="press-3"), ctx)
        tool.warm()
        warm = tool.run(tool.input_model(query="the motor is hot", device_id="press-3"), ctx)
        print(json.dumps([code.status, ready_after_code, cold.status, cold.items[0].fields["fault_code"], warm.status]))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=Path(__file__).parents[1], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == ["ok", False, "degraded", "E102", "ok"]


def test_close_releases_the_index_file(demo_index, tmp_path):
    index = Path(shutil.copy(demo_index, tmp_path / "manuals.sqlite"))  # other tests keep the shared one open
    tool = ManualSearchTool(index, load_config(env={}).devices, None)
    registry = ToolRegistry([tool])
    assert call(registry, {"fault_code": "E102", "device_id": "press-3"}).status == "ok"
    assert str(index) in held_files()
    tool.close()
    assert str(index) not in held_files()


def held_files() -> list[str]:
    return [os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")]


def test_a_scanned_page_is_quoted_as_ocr_text_with_less_confidence(hard_manuals, tmp_path):
    build_index([hard_manuals["scanned"].path], tmp_path / "manuals.sqlite")
    tool = ManualSearchTool(tmp_path / "manuals.sqlite", {}, None)
    tool.warm()
    registry = ToolRegistry([tool])
    try:
        obs = call(registry, {"query": "pulley motor stalled"})
    finally:
        registry.close()
    ref = obs.content[0]
    # The scanned table's rows are entries now (read cell by cell); an entry or a page, it is OCR text.
    assert obs.status == "ok" and ref.fields["kind"] in ("entry", "page") and ref.fields["ocr"] is True
    assert "pulley" in ref.fields["snippet"].lower() and obs.confidence <= 0.6
    answer = render_text(build_document("pulley motor stalled", [obs]))
    assert f"p. {ref.fields['page']}" in answer and "read by OCR" in answer and "pulley" in answer.lower()
