"""`GET /v1/manuals/{manual_id}/pages/{n}.png`: a cited manual page as an image for the tablet.

A manual evidence card carries what the URL needs: `manual_id` (the manual's id in the index),
`page`, and, for an entry, its `fault_code`, passed as `?entry=` to highlight where the entry is
printed. Manuals are addressed by index id only, never by a path. Images are immutable for a
given URL until the manuals are re-indexed; the ETag lets a tablet revalidate cheaply (304).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from fastapi import APIRouter, Header, Query
from fastapi import Path as PathParam
from fastapi.responses import Response

from edge.service.service import ServiceDep

router = APIRouter(tags=["manuals"])
PAGE_PATH = "/v1/manuals/{manual_id}/pages/{n}.png"
# Private: the images are behind a token. A day: a re-indexed manual has a new id, hence new URLs.
CACHE_CONTROL = "private, max-age=86400"
MAX_PAGE = 100_000
MAX_ENTRY_CHARS = 200
# The route's index and file reads (a few ms each) on a few threads of its own: a burst of page requests
# waits for these instead of growing the service's shared thread pool by a thread per request.
_READS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="page-read")


@router.get(
    PAGE_PATH,
    response_class=Response,
    responses={
        200: {"content": {"image/png": {}}, "description": "The page, the entry (if given) highlighted."},
        304: {"description": "The tablet's copy (If-None-Match) is current."},
        404: {"description": "No such manual, page or entry in the index."},
        409: {"description": "The manual's PDF is missing or has changed since it was indexed."},
        503: {"description": "No manual index has been built."},
    },
)
async def manual_page(
    service: ServiceDep,
    manual_id: str = PathParam(
        pattern="^[0-9a-f]{64}$", description="the manual's id in the index (`manual_id` of a manual_search reference)"
    ),
    n: int = PathParam(ge=1, le=MAX_PAGE, description="page number, 1-based as cited"),
    entry: str | None = Query(
        default=None,
        min_length=1,
        max_length=MAX_ENTRY_CHARS,
        description="the fault code of the cited entry, to highlight it",
    ),
    if_none_match: str | None = Header(default=None),
) -> Response:
    images = service.page_images
    loop = asyncio.get_running_loop()
    ref = await loop.run_in_executor(_READS, images.locate, manual_id, n, entry)
    headers = {"Cache-Control": CACHE_CONTROL, "ETag": ref.etag}
    if if_none_match is not None and _matches(if_none_match, ref.etag):
        return Response(status_code=304, headers=headers)
    image = await loop.run_in_executor(_READS, images.cached, ref)
    if image is None:
        # Awaited, not waited for on a thread: a burst of uncached pages queues in the images' render pool.
        image = await asyncio.wrap_future(images.render_later(ref))
    return Response(await loop.run_in_executor(_READS, image.read_bytes), media_type="image/png", headers=headers)


def _matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 13.1.2: `*` matches any current representation (the page was found), else the weak comparison
    of the listed tags."""
    if if_none_match.strip() == "*":
        return True
    return etag in [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
