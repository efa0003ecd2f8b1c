"""Bearer tokens: technicians' tokens for the app's API, the admin token for operations.

Every configured token is compared, each with `hmac.compare_digest`, so the
time taken does not depend on how much of a guess was right nor on which
token matched. Tokens are never logged or echoed; a refusal names what is
missing, not what was sent.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

Role = str  # "technician", "supervisor" or "admin"

_bearer = HTTPBearer(
    auto_error=False,
    description="A technician or supervisor token (tablet; a supervisor's also confirms reported fixes) or the "
    "admin token (operations).",
)


def token_matches(candidate: str, tokens: Sequence[str]) -> bool:
    given = candidate.encode()
    results = [hmac.compare_digest(given, token.encode()) for token in tokens if token]
    return any(results)


def require(role: Role, tokens: Sequence[str]) -> Callable[..., Awaitable[None]]:
    """A FastAPI dependency that lets a request through only with one of `tokens`."""

    # Async though it never awaits: FastAPI runs a sync dependency on a worker thread, one per request.
    async def check(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
        if credentials is None:
            raise HTTPException(
                401,
                f"missing token: send 'Authorization: Bearer <{role} token>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not token_matches(credentials.credentials, tokens):
            raise HTTPException(401, f"invalid {role} token", headers={"WWW-Authenticate": "Bearer"})

    return check
