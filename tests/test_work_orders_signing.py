"""Our Standard Webhooks signer/verifier against the `standardwebhooks` package, both directions."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.fixtures.work_orders import MES_SECRET, ROTATED_SECRET
from tools.work_orders.config import MesConfig
from tools.work_orders.signing import SignatureError, decode_secret, signed_headers, verify

ids = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40)
bodies = st.text(max_size=300).map(lambda s: s.encode("utf-8"))


@settings(max_examples=60, deadline=None)
@given(msg_id=ids, body=bodies)
def test_our_signature_verifies_with_standardwebhooks(msg_id, body):
    headers = signed_headers([MES_SECRET], msg_id, body, time.time())
    assert Webhook(MES_SECRET).verify(body, headers, json_parse=False) is None


@settings(max_examples=60, deadline=None)
@given(msg_id=ids, body=bodies)
def test_standardwebhooks_signature_verifies_with_ours(msg_id, body):
    now = time.time()
    signature = Webhook(MES_SECRET).sign(msg_id, datetime.fromtimestamp(now, UTC), body.decode())
    headers = {"Webhook-Id": msg_id, "Webhook-Timestamp": str(int(now)), "Webhook-Signature": signature}
    assert verify([MES_SECRET], headers, body, now) == msg_id


def test_rotation_one_signature_per_secret():
    body, now = b'{"a":1}', time.time()
    headers = signed_headers([ROTATED_SECRET, MES_SECRET], "msg_1", body, now)
    assert len(headers["webhook-signature"].split()) == 2
    # A receiver that still has only the old secret, or already only the new one, accepts it.
    Webhook(MES_SECRET).verify(body, headers, json_parse=False)
    Webhook(ROTATED_SECRET).verify(body, headers, json_parse=False)
    # We accept a sender signing with either of our configured secrets.
    single = signed_headers([MES_SECRET], "msg_1", body, now)
    assert verify([ROTATED_SECRET, MES_SECRET], single, body, now) == "msg_1"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda h, b: (h, b + b" "), "no webhook-signature matches"),
        (lambda h, b: ({**h, "webhook-id": "msg_other"}, b), "no webhook-signature matches"),
        (lambda h, b: ({**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) - 301)}, b), "-?\\d+ s off"),
        (
            lambda h, b: ({**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) + 400)}, b),
            "s off; accepted: ±300 s",
        ),
        (lambda h, b: ({**h, "webhook-timestamp": "yesterday"}, b), "not whole Unix seconds"),
        (
            lambda h, b: ({k: v for k, v in h.items() if k != "webhook-signature"}, b),
            "missing header.*webhook-signature",
        ),
        (lambda h, b: ({**h, "webhook-signature": "v2,abc v1,%%%"}, b), "no webhook-signature matches"),
    ],
)
def test_tampered_stale_or_incomplete_messages_are_refused(mutate, message):
    body, now = b'{"event_id":"e1"}', time.time()
    headers, tampered = mutate(signed_headers([MES_SECRET], "msg_1", body, now), body)
    with pytest.raises(SignatureError, match=message):
        verify([MES_SECRET], headers, tampered, now)
    # The reference implementation agrees that these are not acceptable.
    with pytest.raises((WebhookVerificationError, ValueError)):
        Webhook(MES_SECRET).verify(tampered, headers)


def test_wrong_secret_is_refused():
    body, now = b"{}", time.time()
    headers = signed_headers([ROTATED_SECRET], "msg_1", body, now)
    with pytest.raises(SignatureError, match="no webhook-signature matches a configured secret"):
        verify([MES_SECRET], headers, body, now)


def test_secrets_are_checked_when_config_loads():
    assert decode_secret(MES_SECRET) == b"test-mes-secret-for-fixloop-0001"
    with pytest.raises(ValueError, match=r"secrets\.0|secrets\[0\]: a webhook secret must start with 'whsec_'"):
        MesConfig(secrets=["hunter2"])
    with pytest.raises(ValueError, match="not valid base64"):
        MesConfig(secrets=["whsec_not base64!"])
    with pytest.raises(ValueError, match="at least 16 bytes"):
        MesConfig(secrets=["whsec_c2hvcnQ="])
    with pytest.raises(ValueError, match=r"mes.url is set but mes.secrets is empty"):
        MesConfig(url="http://mes.local/hooks")
