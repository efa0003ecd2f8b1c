"""The tablet app in a real browser: Playwright driving Debian's Chromium against the real service.

Never downloads a browser: Chromium comes from apt (`make test` installs it).
If it is missing these tests fail with a message saying so; they never skip.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.fixtures.service import TECHNICIAN_TOKEN, run_service

CHROMIUM = Path(os.environ.get("FIXLOOP_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
ORDER = "generate_work_order"
THINK_S = 1.0  # the scripted model's time per step where a takeover has to land mid-step


def call(tool: str, delay_s: float = 0.0, **args: Any) -> dict[str, Any]:
    return {"content": json.dumps({"thought": f"Next: {tool}.", "action": tool, "args": args}), "delay_s": delay_s}


def final(text: str, delay_s: float = 0.0) -> dict[str, Any]:
    return {"content": json.dumps({"thought": "Done.", "final_answer": text, "evidence": ["obs-1", "obs-2"]}),
            "delay_s": delay_s}


SCRIPTS = {
    "E102": [call(MANUAL, fault_code="E102", device_id="press-3"),
             call(PLC, device_id="press-3", sensor="coolant_level"),
             call(ORDER, device_id="press-3", fault_code="E102", summary="E102 motor over-temperature"),
             final("E102 is motor over-temperature protection. Stop the press and check the coolant level; "
                   "a work order is proposed.")],
    "E105": [call(MANUAL, fault_code="E105", device_id="press-3"),
             call(PLC, device_id="press-3", sensor="motor_temp"),
             call(ORDER, device_id="press-3", fault_code="E105", summary="E105 报警"),
             final("E105：请按手册步骤处理，并确认工单。")],
    "E101": [call(MANUAL, THINK_S, fault_code="E101", device_id="press-3"),
             call(PLC, THINK_S, device_id="press-3", sensor="hydraulic_pressure"),
             final("E101 handled.", THINK_S)],
    "E110": [{"status": 500, "content": "model crashed"}],
}


def script(body: dict[str, Any]) -> dict[str, Any]:
    question = body["messages"][1]["content"].splitlines()[0]
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    steps = next((s for key, s in SCRIPTS.items() if key in question), [final("No script.")])
    return steps[min(turn, len(steps) - 1)]


@pytest.fixture(scope="module")
def app_service(tmp_path_factory, demo_index):
    with run_service(tmp_path_factory.mktemp("browser"), demo_index, script,
                     loop={"max_wall_s": 30.0}) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Browser:
    if not CHROMIUM.exists():
        pytest.fail(f"Debian's Chromium is missing at {CHROMIUM}: install it with `apt-get install chromium` "
                    "(`make test` does). The browser tests never download a browser.", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_app(browser: Browser, url: str, locale: str = "en-US", landscape: bool = False) -> Page:
    # A 10" tablet: 800 x 1280 CSS pixels in portrait.
    viewport = {"width": 1280, "height": 800} if landscape else {"width": 800, "height": 1280}
    context = browser.new_context(locale=locale, viewport=viewport, has_touch=True)
    page = context.new_page()
    page.goto(f"{url}/app/#token={TECHNICIAN_TOKEN}")
    return page


def ask(page: Page, device: str, question: str) -> None:
    page.get_by_test_id("device-picker").select_option(device)
    page.get_by_test_id("question").fill(question)
    page.get_by_test_id("ask").click()


def test_ask_stream_answer_with_evidence_and_confirm_the_work_order(browser, app_service):
    page = open_app(browser, app_service.url)
    expect(page.get_by_test_id("device-picker")).to_contain_text("Hydraulic press 3")
    assert "token" not in page.url  # taken from the fragment, kept out of the address bar

    ask(page, "press-3", "Press-3 shows E102, what should I do?")

    timeline = page.get_by_test_id("timeline")
    expect(timeline).to_contain_text("Manual search: E102")
    expect(timeline).to_contain_text("PLC reading: Coolant level on Hydraulic press 3")
    expect(page.get_by_test_id("answer")).to_contain_text("E102 is motor over-temperature protection")
    expect(page.get_by_test_id("reason")).to_have_text("answered")
    expect(page.get_by_test_id("now")).to_have_text("Answered.")

    manual = page.get_by_test_id("manual-card").first
    expect(manual).to_contain_text("E102 — Motor over-temperature protection")
    expect(manual.get_by_test_id("manual-where")).to_have_text(re.compile(r"hydra_hp200_v2\.1_en\.pdf, V2\.1, page \d+"))
    sensor = page.get_by_test_id("sensor-card")
    expect(sensor).to_contain_text("Coolant level")
    expect(sensor.get_by_test_id("sensor-value")).to_have_text(re.compile(r"^\d+(\.\d+)? %$"))
    expect(sensor.get_by_test_id("quality")).to_have_text("live")

    order = page.get_by_test_id("order-card")
    expect(order.get_by_test_id("order-status")).to_have_text("awaiting your confirmation")
    order.get_by_test_id("confirm").click()
    expect(order.get_by_test_id("order-status")).to_have_text("status open")
    expect(order.get_by_test_id("order-id")).to_have_text(re.compile(r"^WO-[0-9A-F]{16}$"))
    order_id = order.get_by_test_id("order-id").inner_text()
    expect(order).to_contain_text(f"Work order {order_id} created.")
    expect(page.get_by_test_id("orders")).to_contain_text(order_id)
    expect(page.get_by_test_id("history")).to_contain_text("Press-3 shows E102, what should I do?")
    expect(page.get_by_test_id("degraded-banner")).to_be_hidden()
    with app_service.client() as client:
        assert [o["id"] for o in client.get("/v1/work-orders", params={"device_id": "press-3"}).json()] == [order_id]

    # The run again from the history, as the service replays it: the same steps, answer and (confirmed) order.
    page.get_by_test_id("new-session").click()
    expect(page.get_by_test_id("timeline")).to_be_empty()
    page.get_by_test_id("history-item").first.get_by_role("button").click()
    expect(timeline).to_contain_text("Manual search: E102")
    expect(timeline).to_contain_text("PLC reading: Coolant level on Hydraulic press 3")
    expect(page.get_by_test_id("answer")).to_contain_text("E102 is motor over-temperature protection")
    expect(page.get_by_test_id("reason")).to_have_text("answered")
    expect(order.get_by_test_id("order-id")).to_have_text(order_id)
    expect(order.get_by_test_id("order-status")).to_have_text("status open")
    expect(order.get_by_test_id("confirm")).to_have_count(0)
    page.context.close()


def test_take_over_mid_run_shows_the_pending_action_and_the_llm_failing_shows_the_banner(browser, app_service):
    page = open_app(browser, app_service.url, landscape=True)
    ask(page, "press-3", "Press-3 shows E101")
    expect(page.locator("[data-testid=step][data-kind=observation]")).to_have_count(1)

    page.get_by_test_id("takeover").click()

    panel = page.get_by_test_id("takeover-panel")
    expect(panel).to_be_visible()
    expect(page.get_by_test_id("pending-action")).to_contain_text("PLC reading: Hydraulic pressure on Hydraulic press 3")
    expect(page.get_by_test_id("reason")).to_have_text("taken over")
    expect(page.get_by_test_id("takeover")).to_be_hidden()
    expect(page.get_by_test_id("manual-card").first).to_contain_text("E101")  # what the agent had found

    expect(page.get_by_test_id("degraded-banner")).to_be_hidden()
    page.get_by_test_id("retry").click()  # retry re-asks; then a question whose model call fails
    expect(page.locator("[data-testid=step][data-kind=observation]")).to_have_count(1)
    page.get_by_test_id("takeover").click()
    expect(page.get_by_test_id("reason")).to_have_text("taken over")
    ask(page, "press-3", "Press-3 shows E110")
    expect(page.get_by_test_id("degraded-banner")).to_be_visible()
    expect(page.get_by_test_id("answer")).to_contain_text("Degraded mode")
    page.context.close()


def test_the_chinese_ui_follows_the_browser_language_and_can_be_switched(browser, app_service):
    page = open_app(browser, app_service.url, locale="zh-CN")
    expect(page.get_by_test_id("ask")).to_have_text("提问")
    expect(page.get_by_test_id("device-picker")).to_contain_text("3号液压机")
    assert page.evaluate("document.documentElement.lang") == "zh-CN"

    ask(page, "press-3", "3号液压机显示E105，怎么办？")

    expect(page.get_by_test_id("timeline")).to_contain_text("查阅手册：E105")
    expect(page.get_by_test_id("timeline")).to_contain_text("读取 PLC：3号液压机 的主电机温度")
    expect(page.get_by_test_id("answer")).to_contain_text("E105：请按手册步骤处理")
    expect(page.get_by_test_id("reason")).to_have_text("已回答")
    expect(page.get_by_test_id("sensor-card")).to_contain_text("主电机温度")
    expect(page.get_by_test_id("sensor-card").get_by_test_id("quality")).to_have_text("实时")
    expect(page.get_by_test_id("manual-card").first.get_by_test_id("manual-where")).to_contain_text("第")

    order = page.get_by_test_id("order-card")
    expect(order.get_by_test_id("order-status")).to_have_text("等待您确认")
    order.get_by_test_id("confirm").click()
    expect(order.get_by_test_id("order-status")).to_have_text("状态 open")
    expect(order).to_contain_text("已创建")

    page.get_by_test_id("lang-switch").click()
    expect(page.get_by_test_id("ask")).to_have_text("Ask")
    expect(page.get_by_test_id("order-status")).to_have_text("status open")
    expect(page.get_by_test_id("sensor-card")).to_contain_text("Main motor temperature")
    page.context.close()
