"""Hazard statements from the manuals: found at index time in each layout vendors use, stored in the
index, and carried by the manual tool with the entries they apply to.

Real PDFs made here with PyMuPDF (and the demo manuals), real SQLite indexes, the real SBERT model.
"""

import io
import sqlite3
from pathlib import Path

import pymupdf
import pytest

from edge.config import load_config
from knowledge.ingest.build import SCHEMA_VERSION, build_index
from knowledge.ingest.extract import extract_manual
from knowledge.ingest.safety import for_entry, hands_on
from knowledge.models import SafetyStatement
from tools.contract import ToolContext
from tools.manual_search import ManualSearchTool
from tools.registry import ToolRegistry

CSS = "body { font-family: sans-serif; font-size: 10pt; } h2 { font-size: 14pt; } td { border: 1px solid black; padding: 3px; }"
PAGE = pymupdf.paper_rect("a4")
CONTENT = PAGE + (56, 72, -56, -72)  # noqa: RUF005 -- moves the rect's edges


def write_pdf(path: Path, pages: list[str]) -> Path:
    """One story per page, so each test's layout lands on the page it is written for."""
    buffer = io.BytesIO()
    writer = pymupdf.DocumentWriter(buffer)
    for markup in pages:
        story = pymupdf.Story(html=markup, user_css=CSS)
        device = writer.begin_page(PAGE)
        story.place(CONTENT)
        story.draw(device)
        writer.end_page()
    writer.close()
    path.write_bytes(buffer.getvalue())
    return path


def decorate(path: Path, page_number: int, text: str, draw) -> None:
    """Draw beside or around the printed `text` on a page (a frame, a pictogram)."""
    doc = pymupdf.open(path)
    page = doc[page_number - 1]
    found = page.search_for(text)
    assert found, text
    draw(page, found[0])
    data = doc.tobytes()
    doc.close()
    path.write_bytes(data)


COVER = "<h1>XR-5 Robot Cell Service Manual</h1><p>Vendor: Axion</p><p>Model: XR-5</p><p>Version: V1.0</p>"
FAULTS = (
    "<h2>4 Troubleshooting</h2>"
    "<h3>Fault code: A101 — Cooling fan failure</h3>"
    "<p>Cause: The cabinet fan does not turn: worn bearing or a broken fan cable.</p>"
    "<p><b>CAUTION</b> — The fan blades can start without warning: switch the cell off before reaching in.</p>"
    "<p>Remedy:</p><p>1. Replace the cabinet fan.</p><p>2. Check the fan cable and its connector.</p>"
    "<h3>Fault code: A103 — Program stopped</h3>"
    "<p>Cause: The operator pressed the stop key.</p><p>Remedy:</p><p>1. Restart the program on the panel.</p>"
    "<table><tr><th>Code</th><th>Name</th><th>Cause</th><th>Remedy</th></tr>"
    "<tr><td>A102</td><td>Overheat warning</td><td>Cabinet above 45 °C.</td><td>1. Clean the filter mat.</td></tr>"
    "<tr><td>A104</td><td>Fan speed low warning</td><td>Fan below 1000 rpm.</td><td>1. Check the fan.</td></tr></table>"
)


@pytest.fixture(scope="module")
def manual(tmp_path_factory) -> Path:
    """Every layout in one manual: opening page, safety chapter, framed panel, two pictograms, an entry."""
    path = write_pdf(
        tmp_path_factory.mktemp("safety") / "axion_xr5_en.pdf",
        [
            COVER + "<p><b>DANGER</b></p><p>Hazardous voltage inside the cabinet. Disconnect the mains supply and wait "
            "5 minutes for the DC bus capacitors to discharge before opening the cover.</p>",
            "<h2>1 Introduction</h2><p>This manual describes the XR-5 robot cell.</p>",
            "<h2>2 Safety instructions</h2><p>Read this chapter before any work on the cell.</p>"
            "<p>Warning: Hot surfaces on the gripper can cause burns.</p>"
            "<p>Note: Keep this manual near the machine.</p>"
            "<h2>3 Installation</h2><p>Place the cell on a level floor.</p>"
            "<p>Caution: Lift the cell at the marked points only, it can tip over and crush feet.</p>",
            "<h2>5 Maintenance</h2><p>Clean the cell weekly.</p>"
            "<p>CAUTION</p><p>Pinch point: keep hands clear of the clamp while the cell runs.</p>"
            "<p>Do not use compressed air on the sensors.</p>"
            "<p>Risk of electric shock: the terminals carry 400 V.</p>"
            "<p>Lubricate the axes every month.</p>"
            "<p>Hot motor surfaces can cause burns.</p>",
            FAULTS,
        ],
    )

    def frame(page, _found):
        blocks = [b for b in page.get_text("blocks") if b[4].startswith(("CAUTION", "Pinch point"))]
        x0, y0 = min(b[0] for b in blocks), min(b[1] for b in blocks)
        x1, y1 = max(b[2] for b in blocks), max(b[3] for b in blocks)
        page.draw_rect(pymupdf.Rect(x0 - 6, y0 - 6, x1 + 6, y1 + 6), color=(0, 0, 0), width=1)

    def triangle(page, found):
        y = (found.y0 + found.y1) / 2
        page.draw_polyline(
            [(found.x0 - 20, y + 7), (found.x0 - 12, y - 7), (found.x0 - 4, y + 7), (found.x0 - 20, y + 7)],
            color=(0, 0, 0),
            fill=(1, 0.8, 0),
        )

    def icon(page, found):
        pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 16, 16), False)
        pixmap.set_rect(pixmap.irect, (255, 200, 0))
        page.insert_image(pymupdf.Rect(found.x0 - 18, found.y0 - 2, found.x0 - 4, found.y0 + 12), pixmap=pixmap)

    decorate(path, 4, "Pinch point", frame)
    decorate(path, 4, "Risk of electric shock", triangle)
    decorate(path, 4, "Hot motor surfaces", icon)
    return path


@pytest.fixture(scope="module")
def statements(manual) -> list[SafetyStatement]:
    return extract_manual(manual).safety


def by_start(statements: list[SafetyStatement], start: str) -> SafetyStatement:
    found = [s for s in statements if s.text.startswith(start)]
    assert len(found) == 1, [s.text for s in statements]
    return found[0]


def test_a_signal_word_on_the_opening_page_is_general_and_electrical(statements):
    danger = by_start(statements, "Hazardous voltage inside the cabinet")
    assert (danger.signal_word, danger.label, danger.page, danger.placement) == ("danger", "DANGER", 1, "opening")
    assert danger.general and danger.electrical and danger.codes == []
    assert danger.text.endswith("before opening the cover.")


def test_the_safety_chapter_ends_at_the_next_chapter(statements):
    hot = by_start(statements, "Hot surfaces on the gripper")
    assert (hot.signal_word, hot.page, hot.placement, hot.general, hot.electrical) == (
        "warning",
        3,
        "chapter",
        True,
        False,
    )
    lift = by_start(statements, "Lift the cell")
    assert (lift.signal_word, lift.placement) == ("caution", "text")


def test_a_framed_panel_and_pictograms_are_general(statements):
    pinch = by_start(statements, "Pinch point")
    assert (pinch.signal_word, pinch.label, pinch.page, pinch.placement) == ("caution", "CAUTION", 4, "panel")
    shock = by_start(statements, "Risk of electric shock")  # a drawn triangle, no signal word
    assert (shock.signal_word, shock.label, shock.placement, shock.electrical) == ("warning", "", "pictogram", True)
    burns = by_start(statements, "Hot motor surfaces")  # a small image beside it
    assert (burns.placement, burns.general, burns.electrical) == ("pictogram", True, False)


def test_notes_fault_names_and_plain_text_are_no_statements(statements):
    texts = " ".join(s.text for s in statements)
    for absent in ("Keep this manual", "Overheat", "Fan speed low", "compressed air", "Lubricate", "level floor"):
        assert absent not in texts
    assert len(statements) == 7


def test_a_statement_inside_an_entry_is_the_entry_s_and_not_one_of_its_steps(manual, statements):
    fan = by_start(statements, "The fan blades can start")
    assert (fan.signal_word, fan.page, fan.placement, fan.general, fan.codes) == (
        "caution",
        5,
        "entry",
        False,
        ["A101"],
    )
    record = next(r for r in extract_manual(manual).records if r.code == "A101")
    assert record.steps == ["Replace the cabinet fan.", "Check the fan cable and its connector."]
    assert "fan blades" not in record.cause and record.cause.startswith("The cabinet fan does not turn")


def test_chinese_statements(tmp_path):
    path = write_pdf(
        tmp_path / "axion_xr5_zh.pdf",
        [
            "<h1>XR-5 机器人单元维修手册</h1><p>厂商: Axion</p>",
            "<h2>1 简介</h2><p>本手册介绍 XR-5 机器人单元。</p>",
            "<h2>2 安全须知</h2><p>危险！柜内有高压，断电后等待 5 分钟再打开柜门，否则会触电。</p>"
            "<p>注意：本手册应妥善保管。</p>"
            "<p>注意：夹爪表面高温，可能烫伤。</p>"
            "<h2>3 安装</h2><p>警告：搬运时防止倾倒挤压。</p>",
        ],
    )
    found = {s.text: s for s in extract_manual(path).safety}
    assert set(found) == {
        "柜内有高压,断电后等待 5 分钟再打开柜门,否则会触电。",
        "夹爪表面高温,可能烫伤。",
        "搬运时防止倾倒挤压。",
    }
    danger = found["柜内有高压,断电后等待 5 分钟再打开柜门,否则会触电。"]
    assert (danger.signal_word, danger.label, danger.placement, danger.electrical) == (
        "danger",
        "危险",
        "chapter",
        True,
    )
    assert (found["夹爪表面高温,可能烫伤。"].signal_word, found["搬运时防止倾倒挤压。"].placement) == (
        "caution",
        "text",
    )


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (["Replace the PT100 sensor."], True),
        (["Check the wiring of the door switch."], True),
        (["Open the cabinet and measure the DC bus voltage."], True),
        (["Tighten the terminal screws."], True),
        (["更换编码器电缆。"], True),
        (["检查接线盒中的门开关接线。"], True),
        (["Read the coolant level (sensor coolant_level).", "Reset the fault on the HMI."], False),
        (["降低行程次数。", "检查油箱油位。"], False),
    ],
)
def test_hands_on_remedies(steps, expected):
    assert hands_on(steps) is expected


def test_an_entry_gets_its_own_statements_then_the_manual_s_electrical_ones_bounded(statements):
    chosen = for_entry(statements, "a101", ["Replace the cabinet fan."])
    assert [s.text[:20] for s in chosen] == ["The fan blades can s", "Hazardous voltage in", "Risk of electric sho"]
    assert [s.text[:20] for s in for_entry(statements, "A101", ["Reset the alarm."])] == ["The fan blades can s"]
    assert for_entry(statements, "A103", ["Restart the program on the panel."]) == []
    assert len(for_entry(statements, "A103", ["Replace the fan."], limit=1)) == 1


def test_the_index_keeps_the_statements_and_the_build_reports_them(manual, tmp_path):
    db = tmp_path / "i.sqlite"
    first = build_index([manual], db)
    assert first.manuals[0].safety == first.safety == 7
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == SCHEMA_VERSION == "9"
        rows = conn.execute(
            "SELECT signal_word, page, general, electrical, placement, codes FROM safety ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    assert ("caution", 5, 0, 1, "entry", '["A101"]') in rows and ("danger", 1, 1, 1, "opening", "[]") in rows
    second = build_index([manual], db)  # unchanged: copied over from the live index, statements too
    assert second.manuals[0].status == "reused" and second.manuals[0].safety == 7


@pytest.fixture(scope="module")
def registry(demo_index: Path):
    registry = ToolRegistry([ManualSearchTool(demo_index, load_config(env={}).devices, None)])
    yield registry
    registry.close()


def call(registry, args):
    return registry.call(
        "search_maintenance_manual_by_fault_code", args, ToolContext(request_id="r", run_id="r", loop_step=1), "o1"
    )


@pytest.mark.parametrize(
    ("language", "own", "electrical"),
    [
        ("en", "The motor housing stays hot", "Hazardous voltage. The DC bus"),
        ("zh", "停机后电机外壳仍然很烫", "危险电压。"),
    ],
)
def test_a_hands_on_entry_carries_its_own_statement_then_the_manual_s_electrical_one(
    registry, language, own, electrical
):
    obs = call(registry, {"fault_code": "E102", "device_id": "press-3", "language": language})
    assert obs.status == "ok" and obs.dropped_fields == []
    ref, first, second = obs.content[:3]
    # The device's lock-out steps (plant config) come between the statements and the manual's steps.
    after = [item.kind for item in obs.content[3:] if "isolation_step" not in item.fields]
    assert (ref.kind, first.kind, second.kind, after[0]) == ("ref", "safety", "safety", "step")
    assert first.text.startswith(own) and second.text.startswith(electrical)
    assert first.fields == {
        "signal_word": "caution",
        "label": "CAUTION" if language == "en" else "注意",
        "applies": "entry",
        "electrical": False,
        "fault_code": "E102",
        "manual": f"hydra_hp200_v2.1_{language}.pdf",
        "version": "V2.1",
        "page": 2,
        "manual_id": ref.fields["manual_id"],
    }
    assert (
        second.fields["signal_word"],
        second.fields["applies"],
        second.fields["electrical"],
        second.fields["page"],
    ) == (
        "danger",
        "general",
        True,
        1,
    )
    payload = obs.payload()["content"][1]  # what the model reads: the quote, its word and where it is printed
    assert payload["text"] == first.text and payload["signal_word"] == "caution" and payload["page"] == 2


def test_an_entry_without_hands_on_work_or_statements_carries_none(registry):
    for code in ("E103", "F02"):
        obs = call(registry, {"fault_code": code, "device_id": "press-3"})
        assert obs.status == "ok" and not [item for item in obs.content if item.kind == "safety"]
    older = call(registry, {"fault_code": "E102", "device_id": "press-3", "manual_version": "V1.2"})
    assert [item.fields["signal_word"] for item in older.content if item.kind == "safety"] == ["caution"]
