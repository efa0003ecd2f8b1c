"""Unknown query parameters are refused (422 naming them), as unknown body fields are.

FastAPI ignores a query parameter a route does not declare, so `?limt=5` or
`?min_step=9` silently lists with the defaults. An app-wide dependency:

    app = FastAPI(dependencies=[Depends(known_query_only)])
"""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute


def declared_query(dependant: Dependant) -> set[str]:
    """The route's query parameters and those of its dependencies (a few fields: cheap per request)."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= declared_query(sub)
    return names


async def known_query_only(request: Request) -> None:
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    declared = declared_query(route.dependant)
    unknown = sorted(set(request.query_params) - declared)
    if unknown:
        takes = f"this endpoint takes {', '.join(sorted(declared))}" if declared else "this endpoint takes none"
        raise RequestValidationError(
            [
                {"loc": ("query", name), "type": "extra_forbidden", "msg": f"unknown query parameter; {takes}"}
                for name in unknown
            ]
        )
