"""Issue 12's attack findings, each kept as a test over real HTTP on loopback: numeric bounds, bodies
refused before they are read, slow clients, alarm storms against a slow LLM, confirm replays, and
runs under load. Timings are never asserted beyond generous bounds that prove "does not wait behind
runs" (seconds, while runs are held for as long as the test likes)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from edge.run.record import RunRecord
from edge.run.store import RunStore
from edge.service.log_limits import RateLimited
from tests.fixtures.service import E102, TECHNICIAN_TOKEN, RunningService, metric, run_service, scrape
from tools.work_orders.signing import signed_headers

MB = 1024 * 1024


def address(service: RunningService) -> tuple[str, int]:
    url = urlsplit(service.url)
    return url.hostname, url.port


def raw_request(service: RunningService, head: str, body_chunks: Iterable[bytes] = ()) -> tuple[bytes, bool]:
    """Send a request head, then body pieces until the server answers; return the answer and whether the
    server closed the connection after it (instead of waiting for the rest of the body)."""
    with socket.create_connection(address(service), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        sock.setblocking(False)
        answer = b""
        for chunk in body_chunks:
            with contextlib.suppress(BlockingIOError):
                answer += sock.recv(65536)
            if answer:
                break
            try:
                sock.sendall(chunk)
            except BlockingIOError:
                time.sleep(0.01)
            except OSError:
                break  # the server closed its side while we were still sending
        sock.setblocking(True)
        sock.settimeout(10)
        try:
            while data := sock.recv(65536):
                answer += data
        except TimeoutError:
            return answer, False
        except ConnectionResetError:
            pass  # closed with our unread body still in its receive buffer: a reset, still closed
        return answer, True


def chunks(size: int, total: int) -> Iterator[bytes]:
    piece = b"x" * size
    for _ in range(total // size):
        yield f"{size:x}\r\n".encode() + piece + b"\r\n"


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def detail_of(answer: bytes) -> str:
    return json.loads(answer.partition(b"\r\n\r\n")[2])["detail"]


# -- 1. every numeric parameter is bounded -----------------------------------


@pytest.mark.parametrize(
    "params, field",
    [
        ({"min_steps": "9223372036854775808"}, "min_steps"),
        ({"min_steps": str(10**40)}, "min_steps"),
        ({"min_steps": "-1"}, "min_steps"),
        ({"limit": "9223372036854775808"}, "limit"),
    ],
)
def test_out_of_range_numbers_are_422_naming_the_parameter(service, params, field):
    with service.client() as client:
        response = client.get("/v1/runs", params=params)
    assert response.status_code == 422, response.text
    assert [error["loc"] for error in response.json()["detail"]] == [["query", field]]


def test_out_of_range_numbers_elsewhere_are_422_too(service):
    with service.client() as technician, service.client("test-admin-token") as admin:
        assert technician.get("/v1/work-orders", params={"limit": 10**30}).status_code == 422
        assert admin.get("/v1/admin/outbox", params={"limit": 10**30}).status_code == 422


def test_an_unknown_query_parameter_is_422_naming_it(service):
    with service.client() as client:
        response = client.get("/v1/runs", params={"limt": 5})
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == ["query", "limt"] and "takes" in error["msg"] and "limit" in error["msg"]


# -- 2. bodies: authenticated first, limited while streaming -----------------


def test_a_declared_oversize_body_is_refused_unread(service):
    answer, closed = raw_request(
        service, f"POST /v1/runs HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: {100 * MB}\n"
    )
    assert status_of(answer) == 413
    assert "at most 65536 bytes" in detail_of(answer)
    assert closed


def test_an_unauthenticated_body_is_never_read(service):
    """An endless chunked body without a token: 401 after the first piece, and the connection closes."""
    answer, closed = raw_request(
        service,
        "POST /v1/runs HTTP/1.1\nHost: x\nContent-Type: application/json\nTransfer-Encoding: chunked\n",
        chunks(64 * 1024, 100 * MB),
    )
    assert status_of(answer) == 401
    assert b"connection: close" in answer.lower()
    assert closed


def test_an_authenticated_body_past_the_limit_is_413_while_it_streams(service):
    answer, closed = raw_request(
        service,
        f"POST /v1/runs HTTP/1.1\nHost: x\nContent-Type: application/json\n"
        f"Authorization: Bearer {TECHNICIAN_TOKEN}\nTransfer-Encoding: chunked\n",
        chunks(16 * 1024, 100 * MB),
    )
    assert status_of(answer) == 413, answer[:300]
    assert "request body too large" in detail_of(answer)
    assert closed


def test_a_body_within_the_limit_still_runs(service):
    result = service.ask(E102 + " " + "pressure dropped " * 100, "press-3")
    assert result.status == 200 and result.events[-1]["type"] == "stored"


def test_an_unsigned_alarm_body_is_never_read(service):
    answer, closed = raw_request(
        service,
        "POST /v1/mes/alarms HTTP/1.1\nHost: x\nContent-Type: application/json\nTransfer-Encoding: chunked\n",
        chunks(64 * 1024, 100 * MB),
    )
    assert status_of(answer) == 401
    assert "missing header(s): webhook-id, webhook-timestamp, webhook-signature" in detail_of(answer)
    assert closed


def huge_alarm(service: RunningService, msg_id: str, signed_at: float) -> tuple[bytes, bool]:
    """A 100 MB chunked alarm body under headers signed (for an empty body) at `signed_at`."""
    signed = signed_headers(service.config.mes.secrets, msg_id, b"{}", signed_at)
    head = "".join(f"{name}: {value}\n" for name, value in signed.items())
    return raw_request(
        service,
        f"POST /v1/mes/alarms HTTP/1.1\nHost: x\n{head}Transfer-Encoding: chunked\n",
        chunks(64 * 1024, 100 * MB),
    )


def test_a_stale_alarm_is_refused_before_its_body_is_read(service):
    answer, closed = huge_alarm(service, "msg_stale", time.time() - 3600)
    assert status_of(answer) == 401 and "s off; accepted" in detail_of(answer)
    assert closed


def test_a_signed_alarm_past_its_limit_is_413_before_the_signature_is_checked(service):
    answer, closed = huge_alarm(service, "msg_huge", time.time())
    assert status_of(answer) == 413 and "at most 262144 bytes" in detail_of(answer)
    assert closed


def test_an_absurd_webhook_timestamp_is_401_not_500(service):
    headers = {"webhook-id": "msg_x", "webhook-timestamp": "9" * 400, "webhook-signature": "v1,AAAA"}
    with service.client(None) as client:
        response = client.post("/v1/mes/alarms", content=b"{}", headers=headers)
    assert response.status_code == 401 and "not whole Unix seconds" in response.json()["detail"]


# -- 3. slow clients ----------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, demo_index) -> Iterator[RunningService]:
    """A service with a short header timeout and a low connection limit, so the test needs few sockets."""
    with run_service(
        tmp_path_factory.mktemp("guarded"), demo_index, service={"header_timeout_s": 2.0, "max_connections": 64}
    ) as running:
        yield running


def slow_sockets(service: RunningService, count: int) -> list[socket.socket]:
    opened = []
    for _ in range(count):
        sock = socket.create_connection(address(service), timeout=10)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line that ends the head
        opened.append(sock)
    return opened


def closed_by_server(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(1024) == b""
    except (TimeoutError, ConnectionResetError):
        return False


def test_slowloris_sockets_past_the_limit_cannot_lock_out_a_real_request(guarded):
    before = scrape(guarded)
    sockets = slow_sockets(guarded, 150)  # more than twice max_connections
    try:
        with guarded.client(None) as client:
            for _ in range(5):
                assert client.get("/healthz", timeout=5).json()["status"] == "ok"
        with guarded.client() as client:
            assert client.get("/v1/devices", timeout=5).status_code == 200
    finally:
        for sock in sockets:
            sock.close()
    dropped = metric(scrape(guarded), "fixloop_http_connections_dropped_total", reason="connection_limit") - metric(
        before, "fixloop_http_connections_dropped_total", reason="connection_limit"
    )
    assert dropped >= 150 - 64


def test_a_request_head_that_trickles_in_is_cut_off_at_the_header_timeout(guarded):
    (sock,) = slow_sockets(guarded, 1)
    try:
        # One more header line every half second keeps an idle timer alive, never the header deadline.
        for _ in range(3):
            time.sleep(0.5)
            sock.sendall(b"X-Slow: 1\r\n")
        assert closed_by_server(sock, within_s=10)
    finally:
        sock.close()


def test_a_keep_alive_connection_serves_several_requests(guarded):
    with guarded.client(None) as client:
        for _ in range(3):
            assert client.get("/healthz").status_code == 200


def test_repeated_errors_are_logged_once_per_interval_with_a_count():
    clock = [0.0]
    logger = logging.getLogger("fixloop.test.flood")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    limiter = RateLimited(interval_s=10, clock=lambda: clock[0])
    logger.addHandler(handler)
    logger.addFilter(limiter)
    try:
        for fd in range(1000):
            logger.error("socket.accept() out of system resource\nsocket: <fd=%d>", fd)
        logger.error("a different error")
        clock[0] = 11.0
        logger.error("socket.accept() out of system resource\nsocket: <fd=%d>", 5)
    finally:
        logger.removeHandler(handler)
        logger.removeFilter(limiter)
    messages = [record.getMessage() for record in records]
    assert len(messages) == 3
    assert messages[1] == "a different error"
    assert "999 more like this in the last 11 s were not logged" in messages[2]


# -- 4. MES alarms against a slow LLM: bounded, and health never waits ----------


@pytest.fixture(scope="module")
def slow_llm_service(tmp_path_factory, demo_index) -> Iterator[tuple[RunningService, threading.Event]]:
    """The first LLM reply of each run is held until the test lets go (or 60 s): runs that stay in flight.
    Released, a run opens the alarm's work order and answers."""
    release = threading.Event()

    def held(body: dict) -> dict:
        if not any(message["role"] == "assistant" for message in body["messages"]):
            release.wait(60)
            return {
                "content": json.dumps(
                    {
                        "thought": "open the order",
                        "action": "generate_work_order",
                        "args": {"device_id": "press-3", "fault_code": "E102", "summary": "MES alarm E102"},
                    }
                )
            }
        return {
            "content": json.dumps({"thought": "done", "final_answer": "Order opened (obs-1).", "evidence": ["obs-1"]})
        }

    with run_service(
        tmp_path_factory.mktemp("slow-llm"),
        demo_index,
        held,
        llm={"timeout_s": 60.0},
        loop={"max_wall_s": 90.0},
        service={"max_concurrent_alarms": 3},
    ) as running:
        try:
            yield running, release
        finally:
            release.set()


def post_alarm(service: RunningService, n: int) -> httpx.Response:
    body = json.dumps(
        {
            "event_id": f"storm-{n}",
            "device_id": "press-3",
            "fault_code": "E102",
            "occurred_at": "2026-03-02T08:15:00+00:00",
            "severity": "high",
        }
    ).encode()
    headers = signed_headers(service.config.mes.secrets, f"msg_storm_{n}", body, time.time())
    with httpx.Client(base_url=service.url, timeout=120) as client:
        return client.post("/v1/mes/alarms", content=body, headers=headers)


def test_an_alarm_storm_is_bounded_and_health_never_waits_behind_it(slow_llm_service):
    service, release = slow_llm_service
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        storm = {n: pool.submit(post_alarm, service, n) for n in range(12)}
        deadline = time.monotonic() + 30
        while sum(f.done() for f in storm.values()) < 9 and time.monotonic() < deadline:
            time.sleep(0.05)
        answered = {n: f.result() for n, f in storm.items() if f.done()}
        assert len(answered) == 9, "all but max_concurrent_alarms are answered at once"
        refused = list(answered.values())
        assert {r.status_code for r in refused} == {503}
        assert all(int(r.headers["retry-after"]) >= 1 for r in refused)
        assert "retry in" in refused[0].json()["detail"]

        # Three alarm runs are held inside the LLM; health, readiness and the device list answer anyway.
        with service.client(None) as anonymous, service.client() as technician:
            for path, client in (("/healthz", anonymous), ("/readyz", anonymous), ("/v1/devices", technician)):
                started = time.perf_counter()
                response = client.get(path, timeout=10)
                assert response.status_code == 200, (path, response.text)
                assert time.perf_counter() - started < 2.0, path
        release.set()
        handled = [f.result(timeout=60) for n, f in storm.items() if n not in answered]
    assert [r.status_code for r in handled] == [200] * 3
    # A refused alarm left nothing behind: its retry is processed like a first delivery.
    retried = post_alarm(service, min(answered))
    assert retried.status_code == 200 and "webhook-replayed" not in retried.headers


# -- 6. a run yields at most one order ----------------------------------------


def test_confirming_again_after_the_order_was_closed_returns_that_order(service):
    result = service.ask(E102, "press-3")
    with service.client() as client:
        first = client.post(f"/v1/runs/{result.run_id}/confirm").json()["work_order"]
        service.service.work_orders.set_status(first["work_order_id"], "cancelled", "technician")
        again = client.post(f"/v1/runs/{result.run_id}/confirm")
        orders = client.get("/v1/work-orders", params={"device_id": "press-3", "active": False}).json()
    assert again.status_code == 200, again.text
    replay = again.json()["work_order"]
    assert replay["work_order_id"] == first["work_order_id"]
    assert replay["created"] is False and replay["work_order_status"] == "cancelled"
    assert set(replay) == set(first)
    assert [o["id"] for o in orders if o["source_run_id"] == result.run_id] == [first["work_order_id"]]


def test_concurrent_confirmations_of_one_run_make_one_order(service):
    with service.client() as client:
        for order in client.get("/v1/work-orders", params={"device_id": "cnc-7"}).json():
            service.service.work_orders.set_status(order["id"], "cancelled", "technician")
    result = service.ask("cnc-7 shows 6065", "cnc-7")

    def confirm(_: int) -> httpx.Response:
        with service.client() as client:
            return client.post(f"/v1/runs/{result.run_id}/confirm")

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(confirm, range(8)))
    assert {r.status_code for r in responses} == {200}
    assert len({r.json()["work_order"]["work_order_id"] for r in responses}) == 1
    assert sum(r.json()["work_order"]["created"] for r in responses) == 1


# -- 8. no run is lost under load ---------------------------------------------

QUESTIONS = [
    (E102, "press-3"),
    ("What is the spindle temperature on cnc-7 right now?", None),
    ("What is the coolant level on press-3 right now?", None),
    ("cnc-7 shows F03", "cnc-7"),
]


def test_64_concurrent_runs_are_all_stored(service):
    asked = QUESTIONS * 16
    with concurrent.futures.ThreadPoolExecutor(len(asked)) as pool:
        results = list(pool.map(lambda q: service.ask(*q), asked))
    assert [r.events[-1]["type"] for r in results] == ["stored"] * len(asked)
    with service.client() as client:
        listed = {row["run_id"] for row in client.get("/v1/runs", params={"limit": 200}).json()}
    assert {r.run_id for r in results} <= listed


def test_run_store_writers_in_one_process_take_turns_instead_of_timing_out(service, tmp_path):
    # A 1 ms busy timeout: writers racing inside SQLite would fail with "database is locked".
    store = RunStore(tmp_path / "runs.sqlite", busy_timeout_ms=1)
    template = service.service.run_store.get(service.ask(E102, "press-3").run_id)
    records = [template.model_copy(update={"run_id": f"run-load-{n}"}) for n in range(64)]
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        list(pool.map(store.save, records))
    assert all(isinstance(store.get(r.run_id), RunRecord) for r in records)
