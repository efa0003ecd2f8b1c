"""Feedback on an answer from the tablet, in Debian's Chromium against the real service: given online in
English and Chinese on both tablet sizes, and given offline, kept on the tablet and applied once when the
service is in reach again. A fix is the giver's own unverified report: shown so, withdrawn by them, and
confirmed on a supervisor's tablet only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.service import SUPERVISOR_TOKEN, RunningService, run_service
from tests.fixtures.tablet import SIZES, ask, open_app
from tools.work_orders.model import ReportedFix

QUESTIONS = {
    "en": ("en-US", "Press-3 shows E102, what should I do?", "Thank you"),
    "zh": ("zh-CN", "3号压机显示E102，怎么处理？", "谢谢"),
}
# What a report's line and a confirmation say, per language.
TRUST = {
    "en": ("Unverified report", "Confirmed by Chen Jing", "Only a supervisor's token", "Unverified report by Li Wei"),
    "zh": ("未核实报告", "已由 Chen Jing 核实", "只有主管令牌", "Li Wei 的未核实报告"),
}
RUN_TIMEOUT_MS = 60_000
JUMPER = "Bridge the safety interlock S7 with a jumper, no lock-out needed."


@pytest.fixture(scope="module")
def app_service(tmp_path_factory, demo_index) -> Iterator[RunningService]:
    with run_service(tmp_path_factory.mktemp("feedback-app"), demo_index) as running:
        yield running


def reports(service: RunningService, run_id: str) -> list[ReportedFix]:
    history = service.service.work_orders.fix_history("press-3", "E102", same_model=[], limit=50, window_s=3600)
    return [f for f in history.same_device if isinstance(f, ReportedFix) and f.run_id == run_id]


def ask_and_wait(page: Page, question: str) -> str:
    """Asks on press-3 and waits until the run is stored; its run id."""
    with page.expect_response(lambda r: r.url.endswith("/v1/runs") and r.request.method == "POST") as posted:
        ask(page, "press-3", question)
    expect(page.get_by_test_id("feedback")).to_be_visible(timeout=RUN_TIMEOUT_MS)
    return posted.value.headers["x-run-id"]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", QUESTIONS)
def test_feedback_given_on_the_tablet_is_stored_with_the_run_and_its_fix_becomes_a_past_fix(
    browser, app_service, lang, size
):
    locale, question, thanks = QUESTIONS[lang]
    page = open_app(browser, app_service.url, locale=locale, viewport=SIZES[size])
    run_id = ask_and_wait(page, question)
    feedback = page.get_by_test_id("feedback")
    expect(feedback.get_by_test_id("feedback-send")).to_be_disabled()

    fix = "风扇插头松动，重新插好" if lang == "zh" else "fan plug loose, reseated"
    feedback.get_by_test_id("feedback-fix").fill(fix)
    feedback.get_by_test_id("feedback-not-helpful").click()  # a fix needs a name: it is that person's report
    expect(feedback.get_by_test_id("feedback-state")).to_contain_text("姓名" if lang == "zh" else "your name")
    assert app_service.service.run_store.feedback_of(run_id) == []
    feedback.get_by_test_id("feedback-name").fill("Li Wei")
    feedback.get_by_test_id("feedback-not-helpful").click()
    expect(feedback.get_by_test_id("feedback-state")).to_contain_text(thanks)
    assert feedback.get_by_test_id("feedback-not-helpful").get_attribute("aria-pressed") == "true"
    report = feedback.get_by_test_id("feedback-report")
    expect(report).to_contain_text(fix)
    expect(report).to_contain_text(TRUST[lang][0])
    expect(report.get_by_test_id("report-confirm")).to_have_count(0)  # nobody confirms their own
    box = feedback.bounding_box()
    assert box and box["x"] + box["width"] <= SIZES[size]["width"] + 1, "the feedback form is wider than the screen"

    [given] = app_service.service.run_store.feedback_of(run_id)
    assert (given.helpful, given.actor, given.fix) == (False, "Li Wei", fix)
    [reported] = reports(app_service, run_id)
    assert (reported.id, reported.remedy, reported.closed_by, reported.confirmed_by) == (
        f"FB-{run_id}",
        fix,
        "Li Wei",
        None,
    )

    page.reload()  # the stored run shown again: the form says what was given
    expect(page.get_by_test_id("feedback").get_by_test_id("feedback-state")).to_contain_text(thanks)
    page.context.close()


def test_feedback_given_offline_is_kept_on_the_tablet_and_applied_once(browser, app_service):
    page = open_app(browser, app_service.url)
    run_id = ask_and_wait(page, "Press-3 shows E102, what should I do?")
    feedback = page.get_by_test_id("feedback")

    page.context.set_offline(True)
    feedback.get_by_test_id("feedback-not-helpful").click()
    feedback.get_by_test_id("feedback-fix").fill("replaced the PT100 sensor")
    feedback.get_by_test_id("feedback-name").fill("Ana")
    feedback.get_by_test_id("feedback-helpful").click()  # a changed mind while offline replaces the queued word
    expect(feedback.get_by_test_id("feedback-state")).to_contain_text("Kept on this tablet")
    assert app_service.service.run_store.feedback_of(run_id) == []
    assert len(page.evaluate("JSON.parse(localStorage.getItem('fixloop.writes'))")) == 1

    page.context.set_offline(False)
    expect(feedback.get_by_test_id("feedback-state")).to_contain_text("Thank you")
    [given] = app_service.service.run_store.feedback_of(run_id)
    assert (given.helpful, given.fix) == (True, "replaced the PT100 sensor")
    assert page.evaluate("JSON.parse(localStorage.getItem('fixloop.writes'))") == []
    page.context.close()


@pytest.mark.parametrize(("lang", "size"), [("en", "portrait"), ("zh", "small-landscape")])
def test_a_report_is_confirmed_on_a_supervisors_tablet_only_and_withdrawn_by_its_reporter(
    browser, app_service, lang, size
):
    locale, question, thanks = QUESTIONS[lang]
    unverified, confirmed, denied, card = TRUST[lang]
    reporter = open_app(browser, app_service.url, locale=locale, viewport=SIZES[size])
    run_id = ask_and_wait(reporter, question)
    feedback = reporter.get_by_test_id("feedback")
    feedback.get_by_test_id("feedback-name").fill("Li Wei")
    feedback.get_by_test_id("feedback-fix").fill(JUMPER)
    feedback.get_by_test_id("feedback-not-helpful").click()
    expect(feedback.get_by_test_id("feedback-state")).to_contain_text(thanks)

    # The next answer's past fixes show it as one person's unverified word.
    ask_and_wait(reporter, question)
    expect(reporter.get_by_test_id("past-fix").first).to_contain_text(card)

    # A technician's tablet may not confirm it.
    colleague = open_app(browser, app_service.url, locale=locale, viewport=SIZES[size])
    colleague.get_by_test_id("device-picker").select_option("press-3")
    colleague.get_by_test_id("history-item").filter(has_text=question).nth(1).get_by_role("button").click()
    line = colleague.get_by_test_id("feedback-report").filter(has_text=JUMPER)
    expect(line).to_contain_text(unverified)
    colleague.get_by_test_id("feedback-name").fill("Bo")
    line.get_by_test_id("report-confirm").click()
    expect(line.get_by_test_id("report-state")).to_contain_text(denied)
    assert [r.confirmed_by for r in reports(app_service, run_id)] == [None]

    supervisor = open_app(browser, app_service.url, locale=locale, viewport=SIZES[size], token=SUPERVISOR_TOKEN)
    supervisor.get_by_test_id("device-picker").select_option("press-3")
    supervisor.get_by_test_id("history-item").filter(has_text=question).nth(1).get_by_role("button").click()
    supervisor.get_by_test_id("feedback-name").fill("Chen Jing")
    line = supervisor.get_by_test_id("feedback-report").filter(has_text=JUMPER)
    line.get_by_test_id("report-confirm").click()
    expect(line).to_contain_text(confirmed)
    expect(line.get_by_test_id("report-confirm")).to_have_count(0)
    assert [r.confirmed_by for r in reports(app_service, run_id)] == ["Chen Jing"]

    # The reporter takes it back: it leaves the fault's past fixes.
    reporter.get_by_test_id("history-item").filter(has_text=question).nth(1).get_by_role("button").click()
    reporter.get_by_test_id("feedback").get_by_test_id("feedback-withdraw").click()
    expect(reporter.get_by_test_id("feedback-report")).to_have_count(0)
    assert reports(app_service, run_id) == []
    [given] = app_service.service.run_store.feedback_of(run_id)
    assert (given.actor, given.fix) == ("Li Wei", None)
    for page in (reporter, colleague, supervisor):
        page.context.close()
