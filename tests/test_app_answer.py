"""The answer panel drawn from the answer document, in Debian's Chromium against the real service, the PLC
simulator and a scripted model, in English and Chinese at both tablet sizes.

Every section shows where its words came from: the manual's DANGER statement and the plant's lock-out come
before the manual's steps, a reading comes with its limits and verdict (one past its limit flagged), the
signal's quality is called signal quality, a question whether it is safe to open the cabinet gets the plant's
zero-energy rule as its verdict, the model's words are labelled as its summary, a technician's fix as an
unverified report, and the degraded banner says what really planned the answer.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.service import RunningService, run_service
from tests.fixtures.tablet import MANUAL, ORDER, PLC, SIZES, ask, by_fault_code, call, final, open_app

COOLANT_PINNED = 12.0  # below the demo plant's low alarm limit of 20 %
DC_BUS_PINNED = 560.0  # the press has power: not safe to open its drive cabinet (zero energy below 30 V)
CABINET = [call(PLC, device_id="press-3", sensor="dc_bus_voltage"), final("Drive DC bus voltage on press-3: 560 V.")]
SCRIPTS = {
    "E102": [
        call(MANUAL, fault_code="E102", device_id="press-3"),
        call(PLC, device_id="press-3", sensor="coolant_level"),
        call(ORDER, device_id="press-3", fault_code="E102", summary="E102 motor over-temperature"),
        final("E102: Motor over-temperature protection. Stop the press and switch the main motor off."),
    ],
    "drive cabinet": CABINET,
    "驱动柜": CABINET,
    # A final answer no observation backs: the rules planner takes the run over.
    "E104": [call(MANUAL, fault_code="E104", device_id="press-3"), final("The oil was changed yesterday by Tom.")],
}
QUESTIONS = {
    "en": ("en-US", "Press-3 shows E102, what should I do?"),
    "zh": ("zh-CN", "3号液压机显示E102，怎么办？"),
}
# What each language's labels say, as the tablet words them (edge/app/i18n.js).
WORDS = {
    "en": {
        "danger": "DANGER",
        "prose": "The language model's summary",
        "verdict": "past the low alarm limit of 20 %",
        "limits": "alarm limits: low 20 %",
        "quality": "signal quality Good",
        "live": "live",
        "isolation": "Plant lock-out",
        "judgement": "Not safe to open",
        "question": "Is it safe to open the drive cabinet on press-3?",
        "unverified": "Unverified report",
    },
    "zh": {
        "danger": "危险",
        "prose": "语言模型的总结",
        "verdict": "已低于低报警限值 20 %",
        "limits": "报警限值：下限 20 %",
        "quality": "信号质量 Good",
        "live": "实时",
        "isolation": "工厂上锁挂牌程序",
        "judgement": "不能打开",
        "question": "3号液压机的驱动柜现在打开安全吗？",
        "unverified": "未核实报告",
    },
}
RUN_TIMEOUT_MS = 60_000
# The answer's sections in the order shown, by test id, each once.
SECTIONS = "() => [...new Set([...document.querySelectorAll('#answer > [data-testid]')].map((n) => n.dataset.testid))]"


@pytest.fixture(scope="module")
def app_service(tmp_path_factory, demo_index) -> Iterator[RunningService]:
    with run_service(
        tmp_path_factory.mktemp("answer-app"), demo_index, by_fault_code(SCRIPTS), loop={"max_wall_s": 30.0}
    ) as running:
        running.sim.set_value("press-3", "coolant_level", COOLANT_PINNED)
        running.sim.set_value("press-3", "dc_bus_voltage", DC_BUS_PINNED)
        yield running


def answered(page: Page, question: str) -> None:
    ask(page, "press-3", question)
    expect(page.get_by_test_id("reason")).to_be_visible(timeout=RUN_TIMEOUT_MS)
    # The termination is shown before the run is stored; tests that read the record wait for the store.
    expect(page.get_by_test_id("feedback")).to_be_visible(timeout=RUN_TIMEOUT_MS)


def fits(page: Page) -> None:
    wide = page.evaluate(
        "() => { const a = document.getElementById('answer-panel'); return a.scrollWidth - a.clientWidth; }"
    )
    assert wide <= 1, f"the answer panel scrolls sideways by {wide} px"


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", QUESTIONS)
def test_the_e102_answer_puts_the_danger_and_the_lockout_before_the_steps_and_flags_a_reading_past_its_limit(
    browser, app_service, lang, size
):
    locale, question = QUESTIONS[lang]
    words = WORDS[lang]
    page = open_app(browser, app_service.url, locale=locale, viewport=SIZES[size])
    answered(page, question)
    answer = page.get_by_test_id("answer")

    danger = answer.locator("[data-testid=answer-safety][data-signal=danger]")
    expect(danger).to_contain_text(words["danger"])
    expect(danger).to_contain_text("wait at least 10 minutes")
    expect(danger.get_by_test_id("source")).to_contain_text("hydra_hp200_v2.1_en.pdf")
    isolation = answer.get_by_test_id("answer-isolation")
    expect(isolation.get_by_test_id("source")).to_have_text(words["isolation"])
    expect(isolation.locator("li")).to_have_count(5)
    expect(answer.get_by_test_id("answer-steps").locator("li").first).to_have_text(
        "Stop the press and switch the main motor off."
    )
    prose = answer.get_by_test_id("answer-prose")
    expect(prose).to_have_attribute("data-source", "model")
    expect(prose).to_contain_text(words["prose"])
    expect(prose).to_contain_text("E102: Motor over-temperature protection.")
    sections = page.evaluate(SECTIONS)
    order = ["answer-safety", "answer-prose", "answer-entry", "answer-isolation", "answer-steps", "answer-reading"]
    assert [s for s in sections if s in order] == order, sections

    reading = answer.get_by_test_id("answer-reading")
    expect(reading).to_have_attribute("data-verdict", "past_low_alarm")
    expect(reading).to_have_attribute("data-flagged", "true")
    expect(reading.get_by_test_id("reading-value")).to_have_text("12 %")
    expect(reading.get_by_test_id("verdict")).to_have_text(words["verdict"])
    expect(reading.get_by_test_id("limits")).to_have_text(words["limits"])
    expect(reading.get_by_test_id("signal-quality")).to_have_text(words["quality"])
    expect(reading.get_by_test_id("reading-source")).to_have_text(words["live"])
    assert reading.evaluate("n => getComputedStyle(n).borderLeftColor") == "rgb(179, 38, 30)"  # --bad
    expect(page.get_by_test_id("degraded-banner")).to_be_hidden()
    fits(page)
    page.context.close()


@pytest.mark.parametrize("lang, size", [("en", "portrait"), ("zh", "small-landscape")])
def test_a_question_whether_it_is_safe_to_open_the_cabinet_gets_the_plants_rule_as_a_verdict(
    browser, app_service, lang, size
):
    words = WORDS[lang]
    page = open_app(browser, app_service.url, locale=QUESTIONS[lang][0], viewport=SIZES[size])
    answered(page, words["question"])
    answer = page.get_by_test_id("answer")

    judgement = answer.get_by_test_id("answer-judgement")
    expect(judgement).to_have_attribute("data-safe", "unsafe")
    expect(judgement).to_contain_text(words["judgement"])
    expect(judgement).to_contain_text("560 V")
    expect(judgement).to_contain_text("30 V")
    # At the top: only the mode line, notices and the manual's safety statements may come before it.
    sections = page.evaluate(SECTIONS)
    assert {"answer-judgement", "answer-reading"} <= set(sections), sections
    assert set(sections[: sections.index("answer-judgement")]) <= {"answer-mode", "answer-notice", "answer-safety"}
    # The OPC UA quality is said to be the signal's: never a bare "Good" that reads like a yes.
    reading = answer.get_by_test_id("answer-reading")
    expect(reading.get_by_test_id("signal-quality")).to_have_text(words["quality"])
    expect(reading).not_to_contain_text(words["verdict"])
    fits(page)
    page.context.close()


def test_a_technicians_fix_is_shown_as_an_unverified_report_and_a_handed_over_run_says_so(browser, app_service):
    page = open_app(browser, app_service.url, viewport=SIZES["small-landscape"])
    with page.expect_response(lambda r: r.url.endswith("/v1/runs") and r.request.method == "POST") as posted:
        answered(page, "Press-3 shows E102 after a restart")
    run_id = posted.value.headers["x-run-id"]
    with app_service.client() as client:
        given = client.post(
            f"/v1/runs/{run_id}/feedback", json={"helpful": False, "fix": "reseated the fan plug", "by": "Li Wei"}
        )
        assert given.status_code == 200, given.text

    for lang in ("en", "zh"):
        answered(page, QUESTIONS[lang][1])
        with app_service.client() as client:
            run_id = page.evaluate("JSON.parse(sessionStorage.getItem('fixloop.run')).runId")
            doc = client.get(f"/v1/runs/{run_id}").json()["record"]["termination"]["answer"]
        report = next(f for f in doc["past_fixes"] if f["cited"]["source"] == "unverified_report")
        fix = page.get_by_test_id("answer").locator("[data-testid=past-fix][data-source=unverified_report]").first
        heading = WORDS[lang]["unverified"]
        if report["reported_by"]:
            heading = (
                f"{heading} by {report['reported_by']}, {report['date']}"
                if lang == "en"
                else f"{report['reported_by']} 的{heading}（{report['date']}）"
            )
        else:
            heading = f"{heading}, {report['date']}" if lang == "en" else f"{heading}（{report['date']}）"
        expect(fix.get_by_test_id("fix-heading")).to_have_text(heading)
        expect(fix).to_contain_text("reseated the fan plug")

    # The model's answer is backed by nothing: the rules planner answers, and the banner and the answer say why.
    answered(page, "Press-3 shows E104")
    mode = page.get_by_test_id("answer-mode")
    expect(mode).to_have_attribute("data-mode", "handed_over")
    expect(mode).to_contain_text("Degraded mode: the language model handed over (its final answer could not be")
    expect(page.get_by_test_id("answer-prose")).to_have_count(0)
    banner = page.get_by_test_id("degraded-banner")
    expect(banner).to_be_visible()
    expect(banner.get_by_test_id("degraded-title")).to_have_text(
        "Degraded mode: the language model handed the run over to the rules planner."
    )
    expect(banner.get_by_test_id("degraded-why")).to_contain_text("Why: its final answer could not be verified")
    page.get_by_test_id("lang-switch").click()
    expect(banner.get_by_test_id("degraded-title")).to_have_text("降级模式：语言模型已把本次运行移交给规则规划器。")
    page.context.close()


def test_a_run_stored_before_the_answer_document_shows_its_plain_text(browser, app_service):
    page = open_app(browser, app_service.url)
    with page.expect_response(lambda r: r.url.endswith("/v1/runs") and r.request.method == "POST") as posted:
        answered(page, "Press-3 shows E102 once more")
    record = app_service.service.run_store.get(posted.value.headers["x-run-id"])
    # The same run as a record from before the document was stored: its termination has no `answer`.
    old = record.model_copy(
        update={"run_id": "run-00000000beef", "termination": record.termination.model_copy(update={"answer": None})}
    )
    app_service.service.run_store.save(old)
    page.evaluate(
        "id => sessionStorage.setItem('fixloop.run', JSON.stringify({runId: id, question: 'E102', deviceId: 'press-3'}))",
        old.run_id,
    )
    page.reload()
    answer = page.get_by_test_id("answer")
    expect(answer).to_have_text(record.termination.final_answer)
    expect(answer.get_by_test_id("answer-safety")).to_have_count(0)
    page.context.close()
