"""Rate-limited error logging for the server's own loggers.

An accept loop out of file descriptors, or a flood of malformed requests,
logs the same error (with a traceback) as often as it happens: hundreds of
megabytes of journal in seconds, hiding everything else. The filter lets one
record of a kind through per interval and says, on the next one it lets
through, how many it held back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

# asyncio logs accept() failures ("Too many open files"); uvicorn.error logs bad requests and app errors.
LIMITED_LOGGERS = ("asyncio", "uvicorn.error")
INTERVAL_S = 10.0
# Kinds remembered at once; a flood of distinct first lines starts the count afresh rather than growing memory.
MAX_KINDS = 1024


class RateLimited(logging.Filter):
    def __init__(self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval_s = interval_s
        self.clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        # The first line names the kind: asyncio appends the failing socket's details on the lines below.
        key = (record.name, record.levelno, str(record.msg).partition("\n")[0])
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.interval_s:
                self._seen[key] = (seen[0], seen[1] + 1)
                return False
            if len(self._seen) >= MAX_KINDS:
                self._seen.clear()
            self._seen[key] = (now, 0)
        if seen is not None and seen[1]:
            last, held = seen
            record.msg = f"{record.msg}\n({held} more like this in the last {now - last:.0f} s were not logged)"
        return True


def limit_repeated_errors(names: tuple[str, ...] = LIMITED_LOGGERS) -> None:
    """Install the filter on the server's loggers, once per process."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RateLimited) for f in logger.filters):
            logger.addFilter(RateLimited())
