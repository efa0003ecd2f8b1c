"""Outbox delivery to a real MES receiver on loopback: retries, backoff, Retry-After, 410, lost acks, outages."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from email.utils import formatdate

import httpx
import pytest

from tests.fixtures.work_orders import MES_SECRET, ROTATED_SECRET
from tools.work_orders.config import MesConfig
from tools.work_orders.outbox import backoff_delay, deliver_due, retry_after_seconds, run_worker
from tools.work_orders.store import WorkOrderStore


def _order(store: WorkOrderStore, fault: str = "E102", device: str = "press-3"):
    order, _ = store.create_or_get(
        device_id=device,
        fault_code=fault,
        title=f"{device} {fault}",
        summary="overheating",
        priority="high",
        created_by="agent",
        run_id="run-1",
    )
    return order


def _config(url: str, **kw) -> MesConfig:
    return MesConfig(url=url, secrets=[MES_SECRET], **{"timeout_s": 2.0, **kw})


@pytest.fixture
def client():
    with httpx.Client() as c:
        yield c


def _due(store: WorkOrderStore) -> float:
    return min(row.next_attempt_at for row in store.outbox(statuses=("pending",)))


def test_fails_first_attempts_then_delivers_exactly_once(work_order_store, mes_receiver, client):
    orders = [_order(work_order_store, f"E10{i}") for i in range(3)]
    work_order_store.set_status(orders[0].id, "acknowledged", actor="technician")
    config = _config(mes_receiver.url)
    mes_receiver.fail_next(4)  # the first round of three and one more
    now = time.time()
    rounds = 0
    while work_order_store.outbox(statuses=("pending",)):
        now = max(now, _due(work_order_store))
        deliver_due(work_order_store, config, client, now, random.Random(1))
        rounds += 1
        assert rounds < 20
    assert len(mes_receiver.attempts) == 4 + 4
    assert mes_receiver.duplicates == [] and mes_receiver.rejected == []
    assert len(mes_receiver.deliveries) == 4
    for order in orders:
        types = sorted(p["type"] for p in mes_receiver.deliveries_for(order.id))
        assert types == (
            ["work_order.created", "work_order.status_changed"] if order is orders[0] else ["work_order.created"]
        )
    assert work_order_store.outbox(statuses=("failed",)) == []
    # The same webhook-id and body went out on every attempt of a row.
    by_id: dict[str, set[bytes]] = {}
    for attempt in mes_receiver.attempts:
        by_id.setdefault(attempt["headers"]["webhook-id"], set()).add(attempt["body"])
    assert all(len(bodies) == 1 for bodies in by_id.values()) and len(by_id) == 4


def test_backoff_doubles_with_jitter_up_to_the_cap():
    config = MesConfig(backoff_base_s=2, backoff_max_s=60)
    rng = random.Random(7)
    for attempt, ceiling in [(1, 2), (2, 4), (3, 8), (5, 32), (6, 60), (20, 60)]:
        delays = [backoff_delay(attempt, config, rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1


def test_retry_after_is_honoured(work_order_store, mes_receiver, client):
    _order(work_order_store)
    config = _config(mes_receiver.url)
    now = time.time()
    mes_receiver.fail_next(1, 429, {"Retry-After": "120"})
    assert deliver_due(work_order_store, config, client, now).retrying == 1
    (row,) = work_order_store.outbox()
    assert row.next_attempt_at == pytest.approx(now + 120) and row.last_status_code == 429
    assert deliver_due(work_order_store, config, client, now + 119).attempted == 0
    mes_receiver.fail_next(1, 503, {"Retry-After": formatdate(now + 300, usegmt=True)})
    assert deliver_due(work_order_store, config, client, now + 120).retrying == 1
    (row,) = work_order_store.outbox()
    assert row.next_attempt_at == pytest.approx(now + 300, abs=1.5)  # the date itself, not 300 s after the attempt
    assert retry_after_seconds("soon", now) is None


def test_410_stops_the_row_until_an_operator_requeues_it(work_order_store, mes_receiver, client):
    order = _order(work_order_store)
    config = _config(mes_receiver.url)
    mes_receiver.fail_next(1, 410)
    now = time.time()
    assert deliver_due(work_order_store, config, client, now).failed == 1
    (row,) = work_order_store.outbox(statuses=("failed",))
    assert row.last_status_code == 410 and "410 Gone" in row.last_error
    assert deliver_due(work_order_store, config, client, now + 10_000).attempted == 0
    assert work_order_store.requeue() == 1
    assert deliver_due(work_order_store, config, client, time.time()).delivered == 1
    assert len(mes_receiver.deliveries_for(order.id)) == 1


def test_lost_acknowledgement_is_resent_and_deduplicated_by_the_receiver(work_order_store, mes_receiver, client):
    order = _order(work_order_store)
    config = _config(mes_receiver.url, timeout_s=0.3)
    mes_receiver.slow_acks, mes_receiver.slow_ack_s = 1, 1.0
    now = time.time()
    stats = deliver_due(work_order_store, config, client, now)
    assert stats.retrying == 1
    (row,) = work_order_store.outbox()
    assert "Timeout" in row.last_error
    assert deliver_due(work_order_store, config, client, row.next_attempt_at).delivered == 1
    assert mes_receiver.duplicates == [row.webhook_id]
    assert len(mes_receiver.deliveries_for(order.id)) == 1


def test_mes_down_for_an_hour_loses_nothing_and_duplicates_nothing(tmp_path, mes_receiver, client):
    real_now = time.time()
    clock = [real_now - 3700]
    store = WorkOrderStore(tmp_path / "wo.sqlite", clock=lambda: clock[0])
    orders = [_order(store, f"E{i}") for i in range(5)]
    config = _config(mes_receiver.url, backoff_base_s=2, backoff_max_s=60)
    mes_receiver.down = True
    rng = random.Random(3)
    while store.outbox(statuses=("pending",)):
        clock[0] = max(clock[0], _due(store))
        if clock[0] >= real_now - 100:
            mes_receiver.down = False
        deliver_due(store, config, client, clock[0], rng)
    assert mes_receiver.rejected == [] and mes_receiver.duplicates == []
    for order in orders:
        assert len(mes_receiver.deliveries_for(order.id)) == 1
    rows = store.outbox(statuses=("delivered",))
    assert len(rows) == 5 and all(row.attempts > 40 for row in rows)  # an hour of retries, at most a minute apart


def test_unreachable_mes_is_retried(work_order_store, client):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _order(work_order_store)
    stats = deliver_due(work_order_store, _config(f"http://127.0.0.1:{port}/hooks"), client, time.time())
    assert stats.retrying == 1
    (row,) = work_order_store.outbox()
    assert row.attempts == 1 and row.last_status_code is None and "ConnectError" in row.last_error


def test_without_a_url_nothing_is_sent_and_nothing_is_lost(work_order_store, client):
    _order(work_order_store)
    assert deliver_due(work_order_store, MesConfig(secrets=[MES_SECRET]), client, time.time()).attempted == 0
    assert len(work_order_store.outbox(statuses=("pending",))) == 1


def test_rotating_secrets_sign_with_each(work_order_store, mes_receiver, client):
    order = _order(work_order_store)
    config = MesConfig(url=mes_receiver.url, secrets=[ROTATED_SECRET, MES_SECRET])
    assert deliver_due(work_order_store, config, client, time.time()).delivered == 1
    (attempt,) = mes_receiver.attempts
    assert len(attempt["headers"]["webhook-signature"].split()) == 2
    assert json.loads(attempt["body"])["data"]["id"] == order.id


def test_concurrent_workers_do_not_post_a_row_twice(work_order_store, mes_receiver):
    for i in range(30):
        _order(work_order_store, f"E{i}")
    config = _config(mes_receiver.url, batch_size=5)
    barrier = threading.Barrier(4)

    def worker():
        with httpx.Client() as own:
            barrier.wait()
            while deliver_due(work_order_store, config, own, time.time()).attempted:
                pass

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(mes_receiver.attempts) == 30 and mes_receiver.duplicates == []
    assert len(mes_receiver.deliveries) == 30


def test_worker_loop_delivers_new_orders_and_stops(work_order_store, mes_receiver):
    config = _config(mes_receiver.url, poll_interval_s=0.05)
    stop = threading.Event()
    rounds: list = []
    thread = threading.Thread(
        target=run_worker, args=(work_order_store, config, stop), kwargs={"on_round": rounds.append}
    )
    thread.start()
    order = _order(work_order_store)
    deadline = time.monotonic() + 10
    while not mes_receiver.deliveries_for(order.id) and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert len(mes_receiver.deliveries_for(order.id)) == 1 and sum(s.delivered for s in rounds) == 1


def test_each_row_is_signed_when_it_is_sent_not_when_the_round_began(work_order_store, mes_receiver, client):
    _order(work_order_store, "E101"), _order(work_order_store, "E102")
    mes_receiver.slow_acks, mes_receiver.slow_ack_s = 1, 1.2  # the first post of the batch takes over a second
    assert deliver_due(work_order_store, _config(mes_receiver.url), client, time.time()).delivered == 2
    first, second = (int(a["headers"]["webhook-timestamp"]) for a in mes_receiver.attempts)
    assert second >= first + 1


def test_a_slow_batch_keeps_its_rows_from_a_second_worker(work_order_store, mes_receiver, client):
    rows = [_order(work_order_store, f"E10{i}") for i in range(3)]
    # Each post takes 0.3 s against a 0.5 s lease: the third row's claim lapses while the batch is still posting.
    config = _config(mes_receiver.url, lease_s=0.5, timeout_s=0.45)
    mes_receiver.slow_acks, mes_receiver.slow_ack_s = 3, 0.3
    with httpx.Client() as other:
        first = threading.Thread(target=deliver_due, args=(work_order_store, config, other, time.time()))
        first.start()
        time.sleep(0.75)
        second = deliver_due(work_order_store, config, client, time.time())
        first.join()
    assert second.attempted == 0
    assert len(mes_receiver.attempts) == 3 and mes_receiver.duplicates == []
    assert {p["data"]["id"] for p in mes_receiver.deliveries.values()} == {o.id for o in rows}


def test_lease_must_outlast_a_request():
    with pytest.raises(ValueError, match=r"lease_s \(5.0\) must exceed timeout_s \(10.0\)"):
        MesConfig(timeout_s=10, lease_s=5)


def test_a_requeued_row_gets_a_fresh_give_up_period(tmp_path, mes_receiver, client):
    clock = [time.time()]
    store = WorkOrderStore(tmp_path / "wo.sqlite", clock=lambda: clock[0])
    _order(store)
    config = _config(mes_receiver.url, give_up_after_s=10)
    mes_receiver.down = True
    assert deliver_due(store, config, client, clock[0] + 11).failed == 1
    clock[0] += 20
    assert store.requeue() == 1
    (row,) = store.outbox()
    assert row.created_at == clock[0] - 20 and row.queued_at == clock[0]
    # Failing again within the new period is a retry, not an immediate give-up.
    assert deliver_due(store, config, client, clock[0] + 1).retrying == 1
    (row,) = store.outbox()
    assert deliver_due(store, config, client, max(row.next_attempt_at, clock[0] + 10)).failed == 1
