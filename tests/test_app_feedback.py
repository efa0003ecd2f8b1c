"""Feedback on an answer from the tablet, in Debian's Chromium against the real service: given online in
English and Chinese on both tablet sizes, and given offline, kept on the tablet and applied once when the
service is in reach again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.service import RunningService, run_service
from tests.fixtures.tablet import SIZES, ask, open_app

QUESTIONS = {
    "en": ("en-US", "Press-3 shows E102, what should I do?", "Thank you"),
    "zh": ("zh-CN", "3号压机显示E102，怎么处理？", "谢谢"),
}
RUN_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def app_service(tmp_path_factory, demo_index) -> Iterator[RunningService]:
    with run_service(tmp_path_factory.mktemp("feedback-app"), demo_index) as running:
        yield running


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

    feedback.get_by_test_id("feedback-fix").fill(
        "风扇插头松动，重新插好" if lang == "zh" else "fan plug loose, reseated"
    )
    feedback.get_by_test_id("feedback-not-helpful").click()
    expect(feedback.get_by_test_id("feedback-state")).to_contain_text(thanks)
    assert feedback.get_by_test_id("feedback-not-helpful").get_attribute("aria-pressed") == "true"
    box = feedback.bounding_box()
    assert box and box["x"] + box["width"] <= SIZES[size]["width"] + 1, "the feedback form is wider than the screen"

    [given] = app_service.service.run_store.feedback_of(run_id)
    assert (given.helpful, given.actor) == (False, "technician")
    assert given.fix in ("风扇插头松动，重新插好", "fan plug loose, reseated")
    history = app_service.service.work_orders.fix_history("press-3", "E102", same_model=[], limit=50, window_s=3600)
    assert [f.remedy for f in history.same_device if f.id == f"FB-{run_id}"] == [given.fix]

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
