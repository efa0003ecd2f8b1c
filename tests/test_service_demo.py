"""`fixloop demo --once`: simulator + service + a first answer, as the README promises."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from tests.fixtures.service import free_port


def test_demo_once_starts_everything_and_prints_the_url_and_a_first_answer(tmp_path, demo_index):
    state = tmp_path / "state"
    # The session's index and PDFs: the demo's incremental build then has nothing to do.
    shutil.copytree(demo_index.parent, state)
    port, plc_port = free_port(), free_port()
    env = {**os.environ, "FIXLOOP_STATE_DIR": str(state), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}

    done = subprocess.run(
        [sys.executable, "-m", "edge.cli.main", "demo", "--once", "--port", str(port), "--plc-port", str(plc_port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"http://127.0.0.1:{port}/app/#token=demo-technician-token" in out
    assert f"modbus://127.0.0.1:{plc_port}" in out
    assert "E102 — Motor over-temperature protection" in out
    assert re.search(r"Coolant level: [\d.]+ % \(live at \S+, signal quality Good\) — within limits", out)
    assert "stop: final_answer" in out
    assert (state / "runs.sqlite").exists()
