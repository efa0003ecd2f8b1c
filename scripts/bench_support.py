"""What the benchmark scripts share: percentiles, timing a call, a free loopback port, a process's RSS and threads
(and their peaks), waiting for a service to warm, an index build's start-up and its stages."""

from __future__ import annotations

import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from edge.service.service import Service
    from knowledge.embed import Embedder
    from knowledge.ingest.build import BuildReport


def pct(values: list[float], q: float) -> float:
    """The q-quantile by nearest rank (q=0.95 is p95)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


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


def threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"Threads:\s+(\d+)", status).group(1))


class PeakSampler:
    """A process's RSS (MB) and thread count, sampled every `interval_s` inside the `with` block: their peaks."""

    def __init__(self, pid: int, interval_s: float = 0.02):
        self.pid, self.interval_s = pid, interval_s
        self.rss_mb, self.threads = rss_mb(pid), threads(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.rss_mb = max(self.rss_mb, rss_mb(self.pid))
            self.threads = max(self.threads, threads(self.pid))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def wait_warm(service: Service, timeout_s: float = 300.0) -> None:
    """Wait for a service's background warm-up (the SBERT model): it would compete with what is measured."""
    deadline = time.monotonic() + timeout_s
    while service.warmup.warming():
        if time.monotonic() > deadline:
            raise SystemExit(f"the service was still warming after {timeout_s:g} s: {service.warmup.state()}")
        time.sleep(0.1)


def build_start_up(model_path: str | None = None) -> tuple[Embedder, float]:
    """The build's model loaded and exported to ONNX, as a process does once before its first build (later builds
    copy the export; a rebuild finds it beside its index), and the seconds that took: start-up, which the
    build rates leave out."""
    from knowledge import onnx_encoder
    from knowledge.embed import Embedder

    started = time.perf_counter()
    embedder = Embedder(model_path)
    embedder.load()
    onnx_encoder.export(embedder, Path(tempfile.mkdtemp()) / "start-up.sqlite")
    return embedder, time.perf_counter() - started


def build_stages(report: BuildReport) -> str:
    """Where a build's seconds went, to compare with a run of other code."""
    stages = report.stages
    return (
        f"read {stages.read_s:.1f} s (embedding beside it), embedding after it {stages.embed_s:.1f} s "
        f"(the embedding threads' time in the encoder {stages.embedding_s:.1f} s), write {stages.write_s:.1f} s; "
        f"{stages.cpu_s:.1f} CPU-s ({report.pages / stages.cpu_s:.1f} pages per CPU-s)"
    )
