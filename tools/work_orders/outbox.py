"""Delivery of outbox rows to the MES as signed Standard Webhooks.

At-least-once on the wire, exactly-once in effect: a row is kept and retried
until the MES answers 2xx, always with the same `webhook-id` and body, and the
receiver de-duplicates on that id. Retries back off exponentially with
jitter, or wait what `Retry-After` asks; 410 Gone stops a row for good.
"""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from tools.work_orders.config import MesConfig
from tools.work_orders.model import OutboxRow
from tools.work_orders.signing import signed_headers
from tools.work_orders.store import WorkOrderStore

log = logging.getLogger(__name__)


@dataclass
class DeliveryStats:
    attempted: int = 0
    delivered: int = 0
    retrying: int = 0
    failed: int = 0


def backoff_delay(attempt: int, config: MesConfig, rng: random.Random) -> float:
    """Delay after the `attempt`-th failure: doubling, capped, with equal jitter so workers spread out."""
    ceiling = min(config.backoff_max_s, config.backoff_base_s * 2.0 ** (attempt - 1))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """`Retry-After` as delay-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def deliver_due(
    store: WorkOrderStore,
    config: MesConfig,
    client: httpx.Client,
    now: float,
    rng: random.Random | None = None,
) -> DeliveryStats:
    """Post every row due by `now` (the round's start) once; record the outcome of each.

    A batch can take up to `batch_size * timeout_s`, longer than a lease and near
    the receiver's timestamp tolerance, so each row is signed with the time it is
    sent and its lease is renewed just before; a row whose lease lapsed and was
    claimed by another worker is left to that worker.
    """
    stats = DeliveryStats()
    url = config.url
    if not url:
        return stats
    rng = rng or random.Random()
    started = time.monotonic()
    for claimed in store.claim_due(now, config.batch_size, config.lease_s):
        at = now + (time.monotonic() - started)
        row = store.renew_lease(claimed, at + config.lease_s)
        if row is None:
            continue
        stats.attempted += 1
        status_code, error, retry_after = _post(row, url, config, client, at)
        if status_code is not None and 200 <= status_code < 300:
            store.record_attempt(
                row.row_id, status="delivered", next_attempt_at=now, status_code=status_code, error=None, now=now
            )
            stats.delivered += 1
        elif status_code == 410:
            store.record_attempt(
                row.row_id,
                status="failed",
                next_attempt_at=now,
                status_code=410,
                error="410 Gone: the MES no longer accepts this endpoint",
                now=now,
            )
            stats.failed += 1
        elif now - row.queued_at >= config.give_up_after_s:
            store.record_attempt(
                row.row_id,
                status="failed",
                next_attempt_at=now,
                status_code=status_code,
                error=f"gave up after {config.give_up_after_s:g} s: {error}",
                now=now,
            )
            stats.failed += 1
        else:
            delay = retry_after if retry_after is not None else backoff_delay(row.attempts + 1, config, rng)
            store.record_attempt(
                row.row_id, status="pending", next_attempt_at=now + delay, status_code=status_code, error=error, now=now
            )
            stats.retrying += 1
    return stats


def _post(
    row: OutboxRow, url: str, config: MesConfig, client: httpx.Client, now: float
) -> tuple[int | None, str | None, float | None]:
    body = row.body.encode("utf-8")
    headers = signed_headers(config.secrets, row.webhook_id, body, now)
    try:
        response = client.post(url, content=body, headers=headers, timeout=config.timeout_s)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500], None
    if response.is_success:
        return response.status_code, None, None
    error = f"HTTP {response.status_code}: {response.text[:200]}"
    return response.status_code, error, retry_after_seconds(response.headers.get("retry-after"), now)


def run_worker(
    store: WorkOrderStore,
    config: MesConfig,
    stop: threading.Event,
    client: httpx.Client | None = None,
    on_round: Callable[[DeliveryStats], None] | None = None,
) -> None:
    """Deliver until `stop` is set; a full batch goes again at once, otherwise wait a poll interval."""
    own_client = client is None
    client = client or httpx.Client()
    try:
        while not stop.is_set():
            try:
                stats = deliver_due(store, config, client, time.time())
            except Exception:  # a locked or unreadable store must not end the worker; the next round retries
                log.exception("outbox delivery round failed")
                stats = DeliveryStats()
            if on_round is not None:
                on_round(stats)
            if stats.attempted < config.batch_size:
                stop.wait(config.poll_interval_s)
    finally:
        if own_client:
            client.close()
