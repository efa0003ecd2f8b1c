"""The tablet app as a technician sees it, in Chromium at tablet sizes, in English and Chinese.

After a run with evidence (the answer with a past fix, a manual card, a sensor card with its sparkline, an order card)
and with the manual page open full-screen: screenshots are saved under the test's tmp dir (their paths are
in every assertion message), nothing is wider than the screen, and every character was drawn by a font —
no "tofu" boxes where a glyph was missing, and no stray "null", "undefined", "NaN" or "[object Object]"
where a value was missing. The side list holds active orders, each with its "Close order…" button. The tofu
check draws each character on a canvas with the page's fonts and compares it with a code point no font has;
a test runs it in a Chromium that sees no CJK font to show that it fails there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.past import seed_fixes, seed_history
from tests.fixtures.service import run_service
from tests.fixtures.tablet import CHROMIUM, CHROMIUM_ARGS, MANUAL, ORDER, PLC, ask, by_fault_code, call, final, open_app
from tests.fixtures.work_orders import take_to
from tools.work_orders.model import Fix, Part

SIZES = {"landscape": {"width": 1024, "height": 768}, "portrait": {"width": 800, "height": 1280}}
# language -> browser locale, question (its fault code picks the script)
QUESTIONS = {
    "en": ("en-US", "Press-3 shows E102, what should I do?"),
    "zh": ("zh-CN", "3号液压机显示E105，报警灯一直亮，怎么办？"),
}
# The work-order tool's word that the fault keeps coming back, as the answer says it.
RECURRING = {"en": "a candidate for root-cause analysis", "zh": "建议进行根本原因分析"}
SCRIPTS = {
    "E102": [
        call(MANUAL, fault_code="E102", device_id="press-3"),
        call(PLC, device_id="press-3", sensor="coolant_level"),
        call(ORDER, device_id="press-3", fault_code="E102", summary="E102 motor over-temperature"),
        # Every sentence said by an observation: the manual's entry and steps, the order's past fix.
        final(
            "E102: Motor over-temperature protection. Stop the press and switch the main motor off. "
            "Check the coolant level (sensor coolant_level). Last time the coolant filter was clogged: "
            "replaced the filter."
        ),
    ],
    "E105": [
        call(MANUAL, fault_code="E105", device_id="press-3"),
        call(PLC, device_id="press-3", sensor="motor_temp"),
        call(ORDER, device_id="press-3", fault_code="E105", summary="E105 报警"),
        final("E105：请按手册步骤处理。上次是风扇被铁屑堵塞，请先检查电机风扇，并确认工单。"),
    ],
}

# Every element's box inside the screen, and no box that scrolls sideways. The page viewer's stage clips a
# zoomed page on purpose; <option>s of a closed <select> have no box.
OVERFLOW = """() => {
  const name = (n) => n.tagName.toLowerCase() + (n.dataset.testid ? `[${n.dataset.testid}]` : n.className ? `.${String(n.className).split(" ")[0]}` : "");
  const found = [];
  const root = document.scrollingElement;
  if (root.scrollWidth > root.clientWidth) found.push(`page: scrollWidth ${root.scrollWidth} > clientWidth ${root.clientWidth}`);
  for (const n of document.querySelectorAll(".panel, .card, .fix, .spark, .close-form, dialog[open], .viewer-bar")) {
    if (n.scrollWidth > n.clientWidth + 1) found.push(`${name(n)}: scrollWidth ${n.scrollWidth} > clientWidth ${n.clientWidth}`);
  }
  for (const n of document.body.querySelectorAll("*")) {
    if (n.closest(".viewer-stage")) continue;
    const r = n.getBoundingClientRect();
    if (r.width && (r.left < -1 || r.right > innerWidth + 1)) found.push(`${name(n)}: ${Math.round(r.left)}..${Math.round(r.right)} of ${innerWidth}`);
  }
  return found;
}"""

# The characters of the visible text that were drawn as the missing-glyph box: the same pixels as U+10FFFD,
# a private-use code point no font has. Drawn with the fonts of the element that holds the character.
TOFU = """() => {
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 40;
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  const pixels = (c, family) => {
    ctx.clearRect(0, 0, 40, 40);
    ctx.font = `28px ${family}`;
    ctx.fillText(c, 4, 30);
    return ctx.getImageData(0, 0, 40, 40).data.join();
  };
  const seen = new Map();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const host = node.parentElement;
    if (!host || !host.getClientRects().length || getComputedStyle(host).visibility === "hidden") continue;
    const family = getComputedStyle(host).fontFamily;
    for (const c of node.data) {
      if (c.trim() && !seen.has(c + family)) seen.set(c + family, [c, family]);
    }
  }
  const missing = new Map();
  const out = [];
  for (const [c, family] of seen.values()) {
    if (!missing.has(family)) missing.set(family, pixels("\\u{10FFFD}", family));
    if (pixels(c, family) === missing.get(family)) out.push(c);
  }
  return { checked: seen.size, tofu: [...new Set(out)].join("") };
}"""

# A JavaScript value that reached the page as text. Each visible text node on its own, not innerText: DOM
# calls make one node per value, and innerText would run two stray nulls into a button's text
# ("nullnullClose order…"), which is no whole word. Placeholders are visible text too.
STRAY = r"""() => {
  const token = /\b(?:null|undefined|NaN)\b|\[object Object\]/;
  const name = (n) => n.tagName.toLowerCase() + (n.dataset.testid ? `[${n.dataset.testid}]` : n.className ? `.${String(n.className).split(" ")[0]}` : "");
  // A closed <select> shows its option's text, though the <option> has no box of its own.
  const shown = (n) => (n.closest("select") || n).getClientRects().length && getComputedStyle(n).visibility !== "hidden";
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const host = node.parentElement;
    if (host && shown(host) && token.test(node.data)) found.push(`${name(host)}: ${JSON.stringify(node.data)}`);
  }
  for (const n of document.body.querySelectorAll("[placeholder]")) {
    if (shown(n) && token.test(n.placeholder)) found.push(`${name(n)} placeholder: ${JSON.stringify(n.placeholder)}`);
  }
  return found;
}"""


@pytest.fixture(scope="module")
def screens_service(tmp_path_factory, demo_index):
    """The plant with a past: each fault fixed twice before on press-3 (a third time makes it recurring),
    two other faults of press-3 still being worked on, and an hour of readings leading to the sensors'
    values now."""
    with run_service(
        tmp_path_factory.mktemp("screens"), demo_index, by_fault_code(SCRIPTS), loop={"max_wall_s": 30.0}
    ) as running:
        seed_fixes(
            running,
            "press-3",
            "E102",
            [
                Fix(
                    cause="coolant filter clogged",
                    remedy="replaced the filter",
                    parts=[Part(part="coolant filter", quantity=1)],
                ),
                Fix(
                    cause="coolant filter clogged again; pump inlet half blocked by swarf",
                    remedy="replaced the filter, cleaned the pump inlet and flushed the circuit",
                    parts=[Part(part="coolant filter", quantity=1), Part(part="coolant", quantity=20)],
                    note="the chip conveyor drops swarf into the tank: ask production to fit a guard",
                ),
            ],
        )
        seed_fixes(
            running,
            "press-3",
            "E105",
            [
                Fix(
                    cause="电机风扇被铁屑堵塞",
                    remedy="清理风扇并加装防护网",
                    parts=[Part(part="风扇防护网", quantity=1)],
                ),
                Fix(
                    cause="电机风扇再次被铁屑堵塞",
                    remedy="清理风扇，更换轴承",
                    parts=[Part(part="6205-2RS 轴承", quantity=2)],
                    note="建议每周清理一次",
                ),
            ],
        )
        for fault_code, title, status in [
            ("E201", "Hydraulic pressure low", "open"),
            ("E305", "滑块导轨润滑不足", "in_progress"),
        ]:
            order, _ = running.service.work_orders.create_or_get(
                device_id="press-3",
                fault_code=fault_code,
                title=title,
                summary=title,
                priority="medium",
                created_by="technician",
                run_id="seed",
            )
            if status != "open":
                take_to(running.service.work_orders, order, status)
        coolant = running.sim.value("press-3", "coolant_level")
        seed_history(running, "press-3", "coolant_level", [coolant + 18 - 0.3 * i for i in range(60)])
        motor = running.sim.value("press-3", "motor_temp")
        seed_history(running, "press-3", "motor_temp", [motor - 14 + 0.23 * i + (i % 5) * 0.4 for i in range(60)])
        yield running


def check_screen(page: Page, shot: Path, full_page: bool = True) -> None:
    page.screenshot(path=str(shot), full_page=full_page)
    overflow = page.evaluate(OVERFLOW)
    assert not overflow, f"wider than the screen in {shot}: {overflow[:10]}"
    text = page.evaluate(TOFU)
    assert text["checked"] > 10 and not text["tofu"], f"characters drawn as missing glyphs in {shot}: {text}"
    stray = page.evaluate(STRAY)
    assert not stray, f"values shown as stray text in {shot}: {stray[:10]}"


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", QUESTIONS)
def test_a_finished_run_and_the_open_manual_page_fit_the_tablet_and_every_character_renders(
    browser, screens_service, tmp_path, size, lang
):
    locale, question = QUESTIONS[lang]
    page = open_app(browser, screens_service.url, locale=locale, viewport=SIZES[size])
    ask(page, "press-3", question)
    expect(page.get_by_test_id("reason")).to_be_visible()
    expect(page.get_by_test_id("manual-card").first).to_be_visible()
    expect(page.get_by_test_id("sensor-card").get_by_test_id("spark-line")).to_have_count(1)
    answer = page.get_by_test_id("answer")
    # The newest fix on this machine, once, however many calls of the order tool returned it.
    expect(answer.get_by_test_id("fix-heading")).to_have_count(1)
    expect(answer.get_by_test_id("answer-other").first).to_contain_text(RECURRING[lang])
    expect(page.get_by_test_id("order-item").get_by_test_id("close-open")).to_have_count(2)
    page.evaluate("document.fonts.ready")

    run_shot = tmp_path / f"{size}-{lang}-run.png"
    check_screen(page, run_shot)

    page.get_by_test_id("manual-card").first.get_by_test_id("open-page").click()
    viewer = page.get_by_test_id("page-viewer")
    expect(viewer.get_by_test_id("page-image")).to_be_visible()
    viewer_shot = tmp_path / f"{size}-{lang}-page.png"
    check_screen(page, viewer_shot, full_page=False)
    box = viewer.get_by_test_id("page-image").bounding_box()
    assert box and box["width"] <= SIZES[size]["width"] + 1, f"the fitted page is wider than the screen: {viewer_shot}"
    page.keyboard.press("Escape")
    expect(viewer).to_have_count(0)
    page.context.close()


def test_the_tofu_check_fails_in_a_chromium_without_a_cjk_font(browser, screens_service, tmp_path):
    """The same app and check in a second Chromium whose fontconfig sees only DejaVu: the Chinese is tofu."""
    (tmp_path / "fonts.conf").write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
        "  <dir>/usr/share/fonts/truetype/dejavu</dir>\n"
        f"  <cachedir>{tmp_path / 'fontconfig-cache'}</cachedir>\n</fontconfig>\n"
    )
    bare = browser.browser_type.launch(
        executable_path=str(CHROMIUM),
        args=CHROMIUM_ARGS,
        env={**os.environ, "FONTCONFIG_FILE": str(tmp_path / "fonts.conf")},
    )
    try:
        page = open_app(bare, screens_service.url, locale="zh-CN")
        expect(page.get_by_test_id("ask")).to_have_text("提问")
        shot = tmp_path / "no-cjk-font.png"
        page.screenshot(path=str(shot))
        text = page.evaluate(TOFU)
    finally:
        bare.close()
    assert "提" in text["tofu"] and "问" in text["tofu"], f"the check missed the tofu in {shot}: {text}"
