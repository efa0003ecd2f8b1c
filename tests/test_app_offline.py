"""The tablet app across Wi-Fi drops, in Debian's Chromium against the real service.

A drop (tests/fixtures/wifi.py) is the browser in Playwright's offline mode and every connection through
a Link in front of the service reset: offline mode alone leaves an open fetch stream running in Chromium.
The steps the app shows are checked against the run's events as the service has them
(`GET /v1/runs/{id}/events`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, Request, expect

from tests.fixtures.link import Link
from tests.fixtures.service import RunningService, metric, run_service, scrape
from tests.fixtures.tablet import MANUAL, ORDER, ask, by_fault_code, call, final, open_app
from tests.fixtures.wifi import LONG_QUESTION, expected_steps, long_run, shown_steps, wifi_down

STEP_S = 2.0  # the scripted model's time per step in the long run: a 5 s drop misses two or three steps
SCRIPTS = {
    "E101": long_run(STEP_S),
    "E102": [call(MANUAL, fault_code="E102", device_id="press-3"), final("E102 is motor over-temperature.")],
    "E105": [call(ORDER, device_id="press-3", fault_code="E105", summary="E105"), final("E105: order proposed.")],
}
DROP_S = 5.0
RUN_TIMEOUT_MS = 30_000
# Short, so that the app's silence limit (2.5 keep-alives) passes within a test; every stream below then
# carries keep-alive comments between its events.
KEEP_ALIVE_S = 0.4


@pytest.fixture(scope="module")
def app_service(tmp_path_factory, demo_index) -> Iterator[RunningService]:
    with run_service(
        tmp_path_factory.mktemp("offline"),
        demo_index,
        by_fault_code(SCRIPTS),
        keep_alive_s=KEEP_ALIVE_S,
        loop={"max_wall_s": 60.0},
    ) as running:
        yield running


@pytest.fixture
def link(app_service) -> Iterator[Link]:
    with Link(app_service.url) as link:
        yield link


@pytest.fixture
def page(browser, link) -> Iterator[Page]:
    page = open_app(browser, link.url)
    expect(page.get_by_test_id("device-picker")).to_contain_text("Hydraulic press 3")
    yield page
    page.context.close()


@pytest.fixture
def resumed_after(page) -> list[int]:
    """The Last-Event-ID of every stream the page resumes, as it sends them."""
    sent: list[int] = []

    def note_resume(request: Request) -> None:
        if request.url.endswith("/stream"):
            sent.append(int(request.headers.get("last-event-id", "-1")))

    page.on("request", note_resume)
    return sent


def ask_long_run(page: Page) -> str:
    """Asks for the long run and waits for its first result; its run id."""
    with page.expect_response(lambda r: r.url.endswith("/v1/runs") and r.request.method == "POST") as posted:
        ask(page, "press-3", LONG_QUESTION)
    # The first result, however many a slow box shows at once: the run has steps to go either way.
    expect(page.locator("[data-testid=step][data-kind=observation]").first).to_be_visible()
    return posted.value.headers["x-run-id"]


def run_events(service: RunningService, run_id: str) -> list[dict[str, Any]]:
    with service.client() as client:
        response = client.get(f"/v1/runs/{run_id}/events")
    assert response.status_code == 200, response.text
    return response.json()


def is_running(service: RunningService, run_id: str) -> bool:
    with service.client() as client:
        return client.get(f"/v1/runs/{run_id}").json()["running"]


def expect_shown_complete_once(page: Page, service: RunningService, run_id: str) -> None:
    """The run shown complete, each of its steps once and in order, as the service recorded them."""
    expect(page.get_by_test_id("reason")).to_have_text("answered", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#spinner")).to_be_hidden()
    events = run_events(service, run_id)
    assert events[-1]["type"] == "stored"
    assert shown_steps(page) == expected_steps(events)
    actions = [e for e in events if e["type"] == "action"]
    shown_actions = page.locator("[data-testid=step][data-kind=action]").all_inner_texts()
    for event, text in zip(actions, shown_actions, strict=True):
        assert all(str(value) in text for value in event["args"].values()), (text, event["args"])


def test_a_run_cut_off_for_five_seconds_mid_run_is_shown_complete_with_every_step_once(
    page, link, app_service, resumed_after
):
    run_id = ask_long_run(page)
    seen_before_drop = len(run_events(app_service, run_id))

    with wifi_down(page, link):
        expect(page.get_by_test_id("link-status")).to_have_text("Offline")
        time.sleep(DROP_S)
        assert is_running(app_service, run_id)  # the run went on without the tablet
        missed = len(run_events(app_service, run_id)) - seen_before_drop
    assert missed >= 2

    expect_shown_complete_once(page, app_service, run_id)
    expect(page.get_by_test_id("link-status")).to_be_hidden()
    # Picked up after what it had, not from the start.
    assert resumed_after and min(resumed_after) >= seen_before_drop - 1


def test_a_stream_that_breaks_while_the_browser_stays_online_is_picked_up_again(page, link, app_service):
    run_id = ask_long_run(page)
    link.cut()  # the service went away (a restart, a broken proxy): no offline event, the stream just fails
    expect(page.get_by_test_id("link-status")).to_have_text("Reconnecting…")
    time.sleep(2 * STEP_S)
    link.restore()
    expect(page.get_by_test_id("link-status")).to_be_hidden(timeout=10_000)
    expect_shown_complete_once(page, app_service, run_id)


def test_a_run_that_finished_while_the_tablet_was_offline_is_shown_complete_on_reconnect(page, link, app_service):
    run_id = ask_long_run(page)
    with wifi_down(page, link):
        deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
        while is_running(app_service, run_id):
            assert time.monotonic() < deadline, "the run never finished"
            time.sleep(0.2)
        expect(page.get_by_test_id("reason")).to_have_count(0)  # nothing could reach the tablet
    expect_shown_complete_once(page, app_service, run_id)
    expect(page.get_by_test_id("answer")).to_contain_text("E101: Main motor overload")


def test_questions_asked_offline_wait_queued_across_a_reload_and_run_in_order_once_online(page, link, app_service):
    page.context.set_offline(True)
    expect(page.get_by_test_id("link-status")).to_have_text("Offline")
    ask(page, "press-3", "Press-3 shows E102, first question")
    ask(page, "press-3", "Press-3 shows E105, second question")
    ask(page, "press-3", "Press-3 shows E102, asked by mistake")
    queued = page.get_by_test_id("queued-item")
    expect(queued).to_have_count(3)
    expect(queued.get_by_test_id("queued-chip")).to_have_text(["queued"] * 3)
    queued.nth(2).get_by_test_id("cancel-queued").click()
    expect(queued.get_by_test_id("queued-question")).to_have_text(
        ["Press-3 shows E102, first question", "Press-3 shows E105, second question"]
    )
    expect(page.get_by_test_id("timeline")).to_be_empty()  # nothing was sent
    page.get_by_test_id("lang-switch").click()
    expect(queued.get_by_test_id("queued-chip")).to_have_text(["排队中"] * 2)
    expect(page.get_by_test_id("link-status")).to_have_text("离线")
    page.get_by_test_id("lang-switch").click()

    # Back online but the service still out of reach: the questions stay queued, a reload keeps them.
    page.route("**/v1/runs", lambda route: route.abort() if route.request.method == "POST" else route.continue_())
    page.context.set_offline(False)
    page.wait_for_event("requestfailed", lambda r: r.url.endswith("/v1/runs"))
    page.reload()
    expect(queued.get_by_test_id("queued-question")).to_have_text(
        ["Press-3 shows E102, first question", "Press-3 shows E105, second question"]
    )

    page.unroute("**/v1/runs")
    expect(queued).to_have_count(0, timeout=RUN_TIMEOUT_MS)
    expect(page.get_by_test_id("timeline")).to_contain_text("Press-3 shows E105, second question")
    expect(page.get_by_test_id("reason")).to_be_visible(timeout=RUN_TIMEOUT_MS)
    expect(page.get_by_test_id("history-item").nth(1)).to_contain_text("Press-3 shows E102, first question")
    expect(page.get_by_test_id("history-item").nth(0)).to_contain_text("Press-3 shows E105, second question")
    with app_service.client() as client:
        runs = client.get("/v1/runs", params={"limit": 50}).json()
    asked = [r["question"] for r in sorted(runs, key=lambda r: r["started_ms"]) if "question" in r["question"]]
    assert asked == ["Press-3 shows E102, first question", "Press-3 shows E105, second question"]


def test_a_reload_mid_run_shows_the_run_again_and_follows_it_to_its_end(page, link, app_service):
    run_id = ask_long_run(page)
    page.reload()
    assert is_running(app_service, run_id)  # the reload landed mid-run
    expect(page.get_by_test_id("timeline")).to_contain_text(LONG_QUESTION)
    expect(page.get_by_test_id("takeover")).to_be_visible()  # shown as running, not as a stored run
    expect_shown_complete_once(page, app_service, run_id)


def long_runs(service: RunningService) -> list[str]:
    with service.client() as client:
        runs = client.get("/v1/runs", params={"limit": 200}).json()
    return [run["run_id"] for run in runs if run["question"] == LONG_QUESTION]


def test_a_question_whose_answer_was_lost_on_the_way_is_sent_again_and_shown_as_its_one_run(page, link, app_service):
    earlier_runs = long_runs(app_service)
    model_calls = len(app_service.llm.requests)
    link.hold_replies()  # the POST reaches the service; its answer waits in the link
    ask(page, "press-3", LONG_QUESTION)
    deadline = time.monotonic() + 10
    while len(app_service.llm.requests) == model_calls:  # the run has started
        assert time.monotonic() < deadline, "the question never reached the service"
        time.sleep(0.05)
    with (
        page.expect_response(lambda r: r.url.endswith("/v1/runs") and r.request.method == "POST") as resent,
        wifi_down(page, link),  # and the Wi-Fi drops before the answer arrives
    ):
        expect(page.get_by_test_id("queued-item")).to_have_count(1)  # kept, to be sent again
        time.sleep(1)
    run_id = resent.value.headers["x-run-id"]
    expect(page.get_by_test_id("queued-item")).to_have_count(0)
    expect_shown_complete_once(page, app_service, run_id)
    deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
    while metric(scrape(app_service), "fixloop_active_runs"):  # a second run would still be going
        assert time.monotonic() < deadline, "runs never finished"
        time.sleep(0.2)
    assert long_runs(app_service) == [run_id, *earlier_runs]


def test_a_stream_that_goes_silent_while_the_browser_stays_online_is_given_up_and_resumed(
    page, link, app_service, resumed_after
):
    run_id = ask_long_run(page)
    link.freeze()  # the open stream hears nothing more, not even a reset; new connections go through
    expect_shown_complete_once(page, app_service, run_id)
    assert resumed_after and min(resumed_after) >= 0  # picked up after what it had
