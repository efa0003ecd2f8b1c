"""Standard Webhooks signatures (https://www.standardwebhooks.com/), both directions.

A message is signed as HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}`
with the secret's base64-decoded bytes; `webhook-signature` holds one
`v1,<base64>` entry per secret, space-separated, so a receiver keeps
verifying while secrets rotate.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
from collections.abc import Mapping, Sequence

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_S = 300.0


class SignatureError(ValueError):
    """Why an inbound message was refused; safe to return to the sender."""


def decode_secret(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a webhook secret must start with {SECRET_PREFIX!r}")
    body = secret[len(SECRET_PREFIX) :]
    try:
        # Some issuers drop the base64 padding: restore it before the strict decode.
        key = base64.b64decode(body.rstrip("=") + "=" * (-len(body.rstrip("=")) % 4), validate=True)
    except binascii.Error:
        raise ValueError("the part after 'whsec_' is not valid base64") from None
    if len(key) < 16:
        raise ValueError(f"a webhook secret must decode to at least 16 bytes, got {len(key)}")
    return key


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(decode_secret(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signed_headers(secrets: Sequence[str], msg_id: str, body: bytes, now: float) -> dict[str, str]:
    if not secrets:
        raise ValueError("no webhook secret configured: cannot sign")
    timestamp = math.floor(now)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets),
        "content-type": "application/json",
    }


def check_headers(
    secrets: Sequence[str],
    headers: Mapping[str, str],
    now: float,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> tuple[str, int]:
    """What can be refused before a body is read: no secret to verify with, a signature header
    missing, a timestamp that is not whole seconds or not recent. Returns (webhook-id, timestamp)."""
    if not secrets:
        raise SignatureError("no webhook secret is configured on this side ([mes] secrets)")
    lowered = {k.lower(): v for k, v in headers.items()}
    missing = [h for h in ("webhook-id", "webhook-timestamp", "webhook-signature") if not lowered.get(h)]
    if missing:
        raise SignatureError(f"missing header(s): {', '.join(missing)}")
    raw_ts = lowered["webhook-timestamp"]
    # Bounded: a 400-digit "timestamp" would overflow the arithmetic below.
    if not (raw_ts.isascii() and raw_ts.isdigit() and len(raw_ts) <= 12):
        raise SignatureError(f"webhook-timestamp {raw_ts[:40]!r} is not whole Unix seconds")
    timestamp = int(raw_ts)
    if abs(now - timestamp) > tolerance_s:
        raise SignatureError(f"webhook-timestamp is {now - timestamp:+.0f} s off; accepted: ±{tolerance_s:g} s")
    return lowered["webhook-id"], timestamp


def verify(
    secrets: Sequence[str],
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> str:
    """Check headers and body; return the webhook-id or raise SignatureError."""
    msg_id, timestamp = check_headers(secrets, headers, now, tolerance_s)
    offered = []
    for entry in {k.lower(): v for k, v in headers.items()}["webhook-signature"].split():
        version, _, value = entry.partition(",")
        if version == "v1":
            try:
                offered.append(base64.b64decode(value, validate=True))
            except binascii.Error:
                continue
    for secret in secrets:
        expected = base64.b64decode(sign(secret, msg_id, timestamp, body)[3:])
        if any(hmac.compare_digest(expected, candidate) for candidate in offered):
            return msg_id
    raise SignatureError("no webhook-signature matches a configured secret")
