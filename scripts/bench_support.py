"""What the benchmark scripts share: percentiles, timing a call, a free loopback port, a process's RSS."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from pathlib import Path


def pct(values: list[float], q: float) -> float:
    """The q-quantile by nearest rank (q=0.95 is p95)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(fn: Callable[[], object], n: int) -> list[float]:
    """Milliseconds per call of `fn`, n calls."""
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024
