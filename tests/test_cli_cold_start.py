"""A cold CLI: the demo index is built on first use, a plant's missing index is a one-line error,
and a fault-code lookup loads neither spaCy nor the SBERT model (nor torch)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path

import pytest

from edge.config import load_config
from knowledge.code_linker import CodeLinker
from knowledge.code_mentions import CodeMentions, plain_code_mentions
from knowledge.search import ManualIndex

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Press-3 shows E102, what should I do?"
HEAVY = {"spacy", "thinc", "sentence_transformers", "transformers", "torch"}


def fixloop(*argv: str, state: Path, config: Path | None = None) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("FIXLOOP") and key not in ("COLUMNS", "LINES")
    }
    env.update({"FIXLOOP_STATE_DIR": str(state), "HF_HUB_OFFLINE": "1"})
    if config is not None:
        env["FIXLOOP_CONFIG"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "edge.cli.main", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def plant_config(tmp_path: Path) -> Path:
    """A plant's own config file: the demo plant's content, but not the embedded demo config."""
    path = tmp_path / "plant.toml"
    path.write_text(resources.files("edge").joinpath("demo.toml").read_text(encoding="utf-8"), encoding="utf-8")
    return path


@pytest.mark.parametrize("argv", [("ask", QUESTION), ("search", "E102")])
def test_the_demo_config_builds_its_index_on_first_use(tmp_path, argv):
    state = tmp_path / "state"

    first = fixloop(*argv, state=state)

    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    assert "E102" in first.stdout and "Motor over-temperature protection" in first.stdout
    announced = [line for line in first.stderr.splitlines() if "building" in line]
    assert len(announced) == 1 and "demo" in announced[0], first.stderr
    assert (state / "manuals.sqlite").exists() and any((state / "manuals").glob("*.pdf"))

    again = fixloop(*argv, state=state)
    assert again.returncode == 0, again.stderr
    assert "building" not in again.stderr


@pytest.mark.parametrize("argv", [("ask", QUESTION), ("search", "E102")])
def test_a_plant_config_without_an_index_is_a_one_line_error(tmp_path, argv):
    state = tmp_path / "state"

    done = fixloop(*argv, state=state, config=plant_config(tmp_path))

    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"fixloop {argv[0]}: no manual index at ") and "`fixloop index build" in lines[0]
    assert not (state / "manuals.sqlite").exists()


def test_only_the_embedded_demo_config_counts_as_the_demo(tmp_path):
    assert load_config(env={}).is_embedded_demo
    assert load_config(env={"FIXLOOP_STATE_DIR": str(tmp_path)}).model_copy(update={"state_dir": "x"}).is_embedded_demo
    assert not load_config(plant_config(tmp_path), env={}).is_embedded_demo


@pytest.mark.parametrize("argv", [("search", "E102"), ("ask", QUESTION)], ids=["search", "ask"])
def test_a_fault_code_lookup_loads_neither_spacy_nor_the_embedding_model(tmp_path, demo_index, argv):
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(demo_index, state / "manuals.sqlite")
    script = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from edge.cli.main import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main({list(argv)!r})
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {sorted(HEAVY)!r})
        print(json.dumps({{"code": code, "out": out.getvalue(), "loaded": loaded}}))
    """)
    env = {key: value for key, value in os.environ.items() if not key.startswith("FIXLOOP")}
    env.update({"FIXLOOP_STATE_DIR": str(state), "HF_HUB_OFFLINE": "1"})

    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0 and "Motor over-temperature protection" in result["out"]
    assert result["loaded"] == []


def test_a_symptom_question_still_gets_semantic_search(tmp_path, demo_index):
    """The CLI warms what a question needs: a symptom gets the SBERT model, not keyword search marked degraded."""
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(demo_index, state / "manuals.sqlite")

    done = fixloop("ask", "the motor on press-3 is very hot", "--json", state=state)

    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    manual = [
        step["observation"] for step in record["steps"] if step["action"] == "search_maintenance_manual_by_fault_code"
    ]
    assert manual and manual[0]["status"] == "ok"  # not "degraded": keyword matches while the model loads


def _texts(demo_index: Path) -> list[str]:
    """Questions, manual steps and generated strings with codes in every kind of surrounding."""
    cases = (ROOT / "tests" / "eval" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in cases if line.strip()]
    index = ManualIndex(demo_index)
    steps = [step for code in sorted(index.codes()) for hit in index.lookup(code, k=10).hits for step in hit.steps]
    index.close()
    words = [
        "E102",
        "e-102",
        "Press-3",
        "cnc 7",
        "fault",
        "alarm 6065",
        "6065",
        "04101",
        "ALARM:1",
        "Err-07",
        "DRV_FAULT",
        "coolant_level",
        "PT100",
        "XX204",
        "01204",
        "F03",
        "f 03",
        "V1.2",
        "0x0400",
        "error #",
        "no.",
        "the",
        "shows",
        "what",
        "°C",
        "Ｅ１０２",
        "报警号",
    ]
    marks = ["", "", "", ",", ".", "?", ";", ":", ")", "(", "'", '"', "/", "-", "_", "#", ").", "'s", "\n", "  "]
    rng = random.Random(7)
    generated = [
        "".join(
            rng.choice(marks) + rng.choice(words) + rng.choice(marks) + rng.choice([" ", "", "\t"])
            for _ in range(rng.randint(1, 6))
        )
        for _ in range(1500)
    ]
    return questions + steps + generated


def test_the_plain_reading_of_codes_agrees_with_the_spacy_linker(demo_index):
    known = [*sorted(ManualIndex(demo_index).codes()), "A1", "do"]
    linker = CodeLinker(known)
    mentions = CodeMentions(known)
    plain = 0
    for text in _texts(demo_index):
        found = plain_code_mentions(text, mentions.known_squeezed, mentions.printed)
        if found is None or any("\u3400" <= char <= "\u9fff" for char in text):
            continue
        plain += 1
        assert [tuple(m) for m in found] == [
            (m.start, m.end, m.code, m.canonical_id) for m in linker.mentions(text, "en")
        ], text
    assert plain > 300


def test_the_command_puts_openblas_idle_threads_to_sleep_before_numpy_loads():
    """OpenBLAS reads the setting when numpy loads it: nothing the command imports first may load numpy."""
    script = "import os, sys, edge.cli.main; print('numpy' in sys.modules, os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_THREAD_TIMEOUT"}

    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )

    assert done.stdout.split() == ["False", "4"], done.stderr


def test_the_demo_index_an_older_fixloop_extracted_is_rebuilt_once(tmp_path, demo_index):
    import sqlite3

    from edge.manual_index import ensure_index
    from knowledge.ingest import outdated

    state = tmp_path / "state"
    shutil.copytree(demo_index.parent, state)
    with sqlite3.connect(state / "manuals.sqlite") as conn:
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'extraction'")
    config = load_config(env={"FIXLOOP_STATE_DIR": str(state)})
    said: list[str] = []

    path = ensure_index(config, announce=said.append)

    assert len(said) == 1 and "extraction 1, this fixloop extracts" in said[0] and "rebuilding" in said[0]
    assert outdated(path) is None
    assert ManualIndex(path).search("E102").hits
    ensure_index(config, announce=said.append)
    assert len(said) == 1
