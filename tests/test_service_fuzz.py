"""A bounded schemathesis pass over /openapi.json: valid and invalid requests to every operation, each with
the token its role needs. No response may be a 5xx, and no invalid request may be accepted.

Bounded to stay well under two minutes on a shared machine: a fixed number of examples per operation and
mode, no shrinking, no example database.
"""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from schemathesis import GenerationMode
from schemathesis.checks import negative_data_rejection, not_a_server_error

from tests.fixtures.service import ADMIN_TOKEN, SUPERVISOR_TOKEN, TECHNICIAN_TOKEN

EXAMPLES = 20
ADMIN_PATHS = ("/metrics", "/v1/admin/")
SUPERVISOR_PATHS = ("/feedback/confirm",)


def negatable(operation: schemathesis.APIOperation) -> bool:
    """Whether there is anything to make invalid: a parameter (the token included) or a body."""
    return bool(list(operation.iter_parameters()) or operation.get_request_payload_content_types())


def token_for(path: str) -> str:
    if path.startswith(ADMIN_PATHS):
        return ADMIN_TOKEN
    return SUPERVISOR_TOKEN if path.endswith(SUPERVISOR_PATHS) else TECHNICIAN_TOKEN


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
def test_fuzzing_finds_no_server_error_and_no_accepted_invalid_request(service, mode):
    schema = schemathesis.openapi.from_url(f"{service.url}/openapi.json")
    checks = [not_a_server_error] + ([negative_data_rejection] if mode is GenerationMode.NEGATIVE else [])
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not negatable(operation):
            continue
        token = {"Authorization": f"Bearer {token_for(operation.path)}"}

        @given(case=operation.as_strategy(generation_mode=mode))
        @hypothesis.settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case: schemathesis.Case) -> None:
            # A case that leaves the token out on purpose (negative mode) must go without it. `exercise`
            # runs right below, within this iteration, so the loop's `token` is the one meant.
            headers = {} if schema.is_security_param_negated(case) else token  # noqa: B023
            response = case.call(base_url=service.url, headers=headers, timeout=30)
            case.validate_response(response, checks=checks)

        exercise()
