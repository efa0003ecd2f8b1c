"""The tablet app in a real browser: Playwright driving Debian's Chromium against the real service.

Never downloads a browser (tests/fixtures/tablet.py): Chromium comes from apt; without it these tests fail.
"""

from __future__ import annotations

import hashlib
import re
import time

import pytest
from playwright.sync_api import expect

from tests.fixtures.past import seed_history
from tests.fixtures.service import run_service
from tests.fixtures.tablet import MANUAL, ORDER, PLC, ask, by_fault_code, call, final, open_app

THINK_S = 1.0  # the scripted model's time per step where a takeover has to land mid-step

SCRIPTS = {
    "E102": [
        call(MANUAL, fault_code="E102", device_id="press-3"),
        call(PLC, device_id="press-3", sensor="coolant_level"),
        call(ORDER, device_id="press-3", fault_code="E102", summary="E102 motor over-temperature"),
        final(
            "E102 is motor over-temperature protection. Stop the press and check the coolant level; "
            "a work order is proposed."
        ),
    ],
    "E105": [
        call(MANUAL, fault_code="E105", device_id="press-3"),
        call(PLC, device_id="press-3", sensor="motor_temp"),
        call(ORDER, device_id="press-3", fault_code="E105", summary="E105 报警"),
        final("E105：请按手册步骤处理，并确认工单。"),
    ],
    "E101": [
        call(MANUAL, THINK_S, fault_code="E101", device_id="press-3"),
        call(PLC, THINK_S, device_id="press-3", sensor="hydraulic_pressure"),
        final("E101 handled.", THINK_S),
    ],
    "E110": [{"status": 500, "content": "model crashed"}],
    "E103": [
        call(MANUAL, fault_code="E103", device_id="press-3"),
        call(ORDER, device_id="press-3", fault_code="E103", summary="E103 hydraulic pressure low"),
        final("E103: check the hydraulic circuit; a work order is proposed."),
    ],
    "E104": [
        call(MANUAL, fault_code="E104", device_id="press-3"),
        call(PLC, device_id="press-3", sensor="oil_temp"),
        final("E104: watch the oil temperature."),
    ],
    "E220": [call(PLC, device_id="cnc-7", sensor="vibration"), final("E220: no vibration reading.")],
}


@pytest.fixture(scope="module")
def app_service(tmp_path_factory, demo_index):
    with run_service(
        tmp_path_factory.mktemp("browser"), demo_index, by_fault_code(SCRIPTS), loop={"max_wall_s": 30.0}
    ) as running:
        yield running


def test_ask_stream_answer_with_evidence_and_confirm_the_work_order(browser, app_service):
    page = open_app(browser, app_service.url)
    expect(page.get_by_test_id("device-picker")).to_contain_text("Hydraulic press 3")
    assert "token" not in page.url  # taken from the fragment, kept out of the address bar

    ask(page, "press-3", "Press-3 shows E102, what should I do?")

    timeline = page.get_by_test_id("timeline")
    expect(timeline).to_contain_text("Manual search: E102")
    expect(timeline).to_contain_text("PLC reading: Coolant level on Hydraulic press 3")
    # Which planner took each step: the model planned all of this run's.
    expect(timeline.get_by_test_id("planner").first).to_have_text("model")
    expect(timeline.get_by_test_id("planner").filter(has_text="rules")).to_have_count(0)
    expect(page.get_by_test_id("answer")).to_contain_text("E102 is motor over-temperature protection")
    expect(page.get_by_test_id("reason")).to_have_text("answered")
    expect(page.get_by_test_id("now")).to_have_text("Answered.")

    manual = page.get_by_test_id("manual-card").first
    expect(manual).to_contain_text("E102 — Motor over-temperature protection")
    expect(manual.get_by_test_id("manual-where")).to_have_text(
        re.compile(r"hydra_hp200_v2\.1_en\.pdf, V2\.1, page \d+")
    )
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
    expect(page.get_by_test_id("pending-action")).to_contain_text(
        "PLC reading: Hydraulic pressure on Hydraulic press 3"
    )
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
    expect(page.get_by_test_id("degraded-title")).to_have_text(
        "Degraded mode: the language model was unavailable; the rules planner answered."
    )
    expect(page.get_by_test_id("answer-mode")).to_have_attribute("data-mode", "model_unavailable")
    expect(page.get_by_test_id("answer")).to_contain_text("Degraded mode: the language model was unavailable (")
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


def manual_ref(app_service, page, code: str) -> dict:
    """The manual search's reference for `code` in the run on screen, as the service stored it."""
    run_id = page.evaluate("JSON.parse(sessionStorage.getItem('fixloop.run')).runId")
    with app_service.client() as client:
        # The card shows at the observation, before the record is stored.
        deadline = time.monotonic() + 30
        while client.get(f"/v1/runs/{run_id}").json()["running"] and time.monotonic() < deadline:
            time.sleep(0.1)
        events = client.get(f"/v1/runs/{run_id}/events").json()
    refs = [
        item["fields"]
        for e in events
        if e["type"] == "observation"
        for item in e["observation"]["content"]
        if item["kind"] == "ref"
    ]
    return next(f for f in refs if f.get("manual_id") and f.get("fault_code") == code)


def test_a_manual_card_opens_its_page_full_screen_to_zoom_pan_and_close(browser, app_service):
    page = open_app(browser, app_service.url, landscape=True)
    ask(page, "press-3", "Press-3 shows E104, what should I do?")
    card = page.get_by_test_id("manual-card").first
    expect(card.get_by_test_id("open-page")).to_be_visible()
    ref = manual_ref(app_service, page, "E104")
    expect(card.get_by_test_id("open-page")).to_have_text(f"Show page {ref['page']}")

    card.get_by_test_id("open-page").click()
    viewer = page.get_by_test_id("page-viewer")
    image = viewer.get_by_test_id("page-image")
    expect(image).to_be_visible()
    expect(viewer.get_by_test_id("viewer-status")).to_be_hidden()
    width, height = image.evaluate("img => [img.naturalWidth, img.naturalHeight]")
    assert width > 0 and height > 0
    # The very image the service renders for the cited page with the entry highlighted, fetched with the token.
    shown = image.evaluate("""async img => {
        const digest = await crypto.subtle.digest("SHA-256", await (await fetch(img.src)).arrayBuffer());
        return [...new Uint8Array(digest)].map(b => b.toString(16).padStart(2, "0")).join("");
    }""")
    with app_service.client() as client:
        served = client.get(f"/v1/manuals/{ref['manual_id']}/pages/{ref['page']}.png", params={"entry": "E104"})
    assert served.status_code == 200 and shown == hashlib.sha256(served.content).hexdigest()

    stage = viewer.get_by_test_id("viewer-stage")
    expect(stage).to_have_attribute("data-zoom", "1.00")
    viewer.get_by_test_id("zoom-in").click()
    expect(stage).to_have_attribute("data-zoom", "1.60")
    viewer.get_by_test_id("zoom-out").click()
    expect(stage).to_have_attribute("data-zoom", "1.00")
    # Two fingers through Chromium's own touch input: 100 px apart, then 200 px apart, is twice the size.
    box = stage.bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    touch = page.context.new_cdp_session(page)

    def fingers(kind: str, apart: float) -> None:
        points = [{"x": cx - apart / 2, "y": cy, "id": 0}, {"x": cx + apart / 2, "y": cy, "id": 1}]
        touch.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": points if kind != "touchEnd" else []})

    fingers("touchStart", 100)
    for apart in (125, 150, 175, 200):
        fingers("touchMove", apart)
    fingers("touchEnd", 200)
    expect(stage).to_have_attribute("data-zoom", "2.00")
    # One finger (here the mouse) drags the zoomed page; a double tap fits it again, another zooms in.
    before = image.evaluate("img => img.style.transform")
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx + 80, cy + 60, steps=4)
    page.mouse.up()
    assert image.evaluate("img => img.style.transform") != before
    stage.dblclick()
    expect(stage).to_have_attribute("data-zoom", "1.00")
    stage.dblclick()
    expect(stage).to_have_attribute("data-zoom", "2.50")

    source = image.evaluate("img => img.src")
    viewer.get_by_test_id("close-viewer").click()
    expect(viewer).to_have_count(0)
    assert page.evaluate("src => fetch(src).then(() => 'kept', () => 'revoked')", source) == "revoked"

    # A page the service cannot show: its refusal in its own words. (The request is pointed at a page the
    # manual does not have; the answer is the real service's.)
    missing = f"/v1/manuals/{ref['manual_id']}/pages/999.png"
    with app_service.client() as client:
        detail = client.get(missing).json()["detail"]
    page.route("**/pages/*.png*", lambda route: route.continue_(url=app_service.url + missing))
    card.get_by_test_id("open-page").click()
    expect(viewer.get_by_test_id("viewer-error")).to_have_text(f"The page cannot be shown: {detail}")
    page.keyboard.press("Escape")
    expect(viewer).to_have_count(0)
    page.context.close()


def test_the_sensor_card_draws_the_last_hour_with_its_alarm_limit_and_trend(browser, app_service):
    now = app_service.sim.value("press-3", "oil_temp")
    seed_history(app_service, "press-3", "oil_temp", [now - 12 + 0.2 * i for i in range(61)])
    page = open_app(browser, app_service.url)
    ask(page, "press-3", "Press-3 shows E104")

    card = page.get_by_test_id("sensor-card")
    chart = card.get_by_test_id("sparkline")
    expect(chart).to_be_visible()
    with app_service.client() as client:
        history = client.get("/v1/devices/press-3/sensors/oil_temp/history", params={"window_s": 3600}).json()
    count = len(history["points"])
    assert count >= 62  # the seeded hour and the tool's own reading (and any earlier test's)
    expect(chart).to_have_attribute("data-points", str(count))
    line = chart.get_by_test_id("spark-line").get_attribute("d")
    assert len(re.findall(r"[ML]", line)) == count
    ys = [float(y) for y in re.findall(r"[ML][\d.]+ ([\d.]+)", line)]
    assert ys[0] > ys[-1]  # rising: SVG's y grows downwards
    limit = chart.locator("[data-testid=spark-limit][data-limit=high]")
    expect(limit).to_have_count(1)
    assert float(limit.get_attribute("y1")) < min(ys)  # 70 °C, above every reading
    assert history["trend"]["direction"] == "rising"
    expect(card.get_by_test_id("trend")).to_have_text(re.compile(r"^rising \d[\d.]* °C/min$"))
    expect(card.get_by_test_id("spark-limits")).to_have_text("alarm above 70 °C")

    # A sensor that has never answered: a line saying so, not an empty chart.
    app_service.sim.silence("cnc-7")
    try:
        ask(page, "cnc-7", "CNC-7 alarm E220")
        card = page.get_by_test_id("sensor-card")
        expect(card).to_contain_text("no current value")
        expect(card.get_by_test_id("spark-empty")).to_have_text("No history yet for the last hour.")
        expect(card.get_by_test_id("sparkline")).to_have_count(0)
    finally:
        app_service.sim.silence("cnc-7", False)
    page.context.close()


def test_a_technician_closes_an_order_with_the_fix_and_the_next_occurrence_shows_it(browser, app_service):
    page = open_app(browser, app_service.url, landscape=True)
    ask(page, "press-3", "Press-3 shows E103")
    order = page.get_by_test_id("order-card")
    order.get_by_test_id("confirm").click()
    expect(order.get_by_test_id("order-status")).to_have_text("status open")
    order_id = order.get_by_test_id("order-id").inner_text()

    def stored() -> dict:
        with app_service.client() as client:
            orders = client.get(
                "/v1/work-orders", params={"device_id": "press-3", "active": False, "limit": 200}
            ).json()
        return next(o for o in orders if o["id"] == order_id)

    order.get_by_test_id("close-open").click()
    form = order.get_by_test_id("close-form")
    # open cannot go straight to done: the form says which steps it takes
    expect(form.get_by_test_id("close-path")).to_have_text("Goes acknowledged → in_progress → done.")
    form.get_by_test_id("close-parts").fill("×2")
    form.get_by_test_id("close-submit").click()
    expect(form.get_by_test_id("close-error")).to_contain_text("parts line 1 “×2”")
    assert stored()["status"] == "open"  # refused in the form: nothing was sent

    # The service's refusal, in its words; the steps before done were taken and stay (a legal status).
    form.get_by_test_id("close-cause").fill("x" * 2001)
    form.get_by_test_id("close-parts").fill("seal kit ×1\nhydraulic oil x 2\n")
    # Entering in_progress confirms the press isolated; its DC bus reads discharged (tests/test_app_checklist.py).
    app_service.sim.set_value("press-3", "dc_bus_voltage", 12)
    form.get_by_test_id("isolation-confirm").check()
    form.get_by_test_id("isolation-by").fill("J. Weber")
    form.get_by_test_id("close-submit").click()
    expect(form.get_by_test_id("close-error")).to_have_text(
        "Not closed: cause: String should have at most 2000 characters"
    )
    assert stored()["status"] == "in_progress"
    form.get_by_test_id("close-cause").fill("worn pump seal")
    form.get_by_test_id("close-remedy").fill("replaced the seal, topped up the oil")
    form.get_by_test_id("close-note").fill("check again in a week")
    form.get_by_test_id("close-submit").click()

    expect(order.get_by_test_id("order-status")).to_have_text("status done")
    expect(order.get_by_test_id("close-ok")).to_have_text(f"Work order {order_id} closed as done.")
    expect(order.get_by_test_id("close-open")).to_have_count(0)
    closed = stored()
    assert (closed["status"], closed["closed_by"], closed["cause"], closed["remedy"], closed["note"]) == (
        "done",
        "technician",
        "worn pump seal",
        "replaced the seal, topped up the oil",
        "check again in a week",
    )
    assert closed["parts"] == [{"part": "seal kit", "quantity": 1}, {"part": "hydraulic oil", "quantity": 2}]
    expect(page.get_by_test_id("orders")).not_to_contain_text(order_id)

    # The fault comes back: the answer carries the fix just recorded, as a recorded fix.
    ask(page, "press-3", "Press-3 shows E103 again")
    fix = page.get_by_test_id("answer").get_by_test_id("past-fix").first
    expect(fix).to_have_attribute("data-source", "recorded_fix")
    expect(fix).to_contain_text(f"Last fix on this machine {order_id}, closed")
    expect(fix).to_contain_text("Cause: worn pump seal")
    expect(fix).to_contain_text("Parts: seal kit ×1, hydraulic oil ×2")
    # two orders in 30 days: not yet recurring
    expect(page.get_by_test_id("answer")).not_to_contain_text("root-cause analysis")

    # Closed from the side list this time; the card of the run follows.
    order.get_by_test_id("confirm").click()
    expect(order.get_by_test_id("order-status")).to_have_text("status open")
    second = order.get_by_test_id("order-id").inner_text()
    item = page.get_by_test_id("order-item").filter(has_text=second)
    item.get_by_test_id("close-open").click()
    item.get_by_test_id("close-cause").fill("seal again")
    item.get_by_test_id("isolation-confirm").check()
    item.get_by_test_id("close-submit").click()
    expect(page.get_by_test_id("orders")).not_to_contain_text(second)
    expect(order.get_by_test_id("order-status")).to_have_text("status done")
    app_service.sim.end("press-3", "set_value", "dc_bus_voltage")
    page.context.close()


def test_a_chinese_question_in_the_english_ui_gets_chinese_labels_in_its_trace_and_cards(browser, app_service):
    page = open_app(browser, app_service.url)
    ask(page, "press-3", "3号液压机显示E104，油温高，怎么办？")

    timeline = page.get_by_test_id("timeline")
    expect(timeline).to_contain_text("已收到问题")
    expect(timeline).to_contain_text("查阅手册：E104")
    expect(timeline).to_contain_text("读取 PLC：3号液压机 的液压油温")
    expect(page.get_by_test_id("reason")).to_have_text("已回答")
    expect(page.get_by_test_id("manual-card").first.get_by_test_id("open-page")).to_have_text(
        re.compile(r"^查看第 \d+ 页$")
    )
    expect(page.get_by_test_id("sensor-card").get_by_test_id("trend")).to_have_text(
        re.compile("上升|下降|平稳|趋势未知")
    )
    assert timeline.get_attribute("lang") == page.get_by_test_id("evidence").get_attribute("lang") == "zh-CN"
    expect(page.get_by_test_id("ask")).to_have_text("Ask")  # the app around the run stays in its language

    # The page viewer opened from a Chinese card speaks Chinese too.
    page.get_by_test_id("manual-card").first.get_by_test_id("open-page").click()
    expect(page.get_by_test_id("close-viewer")).to_have_attribute("aria-label", "关闭")
    page.keyboard.press("Escape")

    ask(page, "press-3", "Press-3 shows E104")
    expect(timeline).to_contain_text("Manual search: E104")
    expect(page.get_by_test_id("reason")).to_have_text("answered")
    page.context.close()
