"""The embedding model exported to ONNX Runtime, which embeds as PyTorch does (to 1e-6) in less time.

A search embeds one short question, and for that PyTorch spends most of its time on overhead: on
the dev corpus's questions ONNX Runtime takes p50 5.6 ms against 13.3 ms on one core, and a search
process never imports torch. The build embeds its passages with it too: 1.65x the throughput of
PyTorch on one core (the 3,388 texts of the 29 development manuals in 31.7 s against 52.4 s).
The build exports the model once (`export`) into one file beside the index, named after the model
it came from, with the tokenizer inside; `ManualIndex` uses it when it is there and falls back to
the sentence-transformers model when it is not (an index built before, a model whose pooling the
export does not cover).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from knowledge.embed import Embedder

if TYPE_CHECKING:
    from tokenizers import Encoding

TOKENIZER_KEY = "tokenizer.json"
_exported: dict[str, Path] = {}  # model identity → a file this process exported (copied for the next index)
_export_lock = threading.Lock()


def encoder_path(index_path: Path, identity: str) -> Path:
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return index_path.with_name(f"{index_path.stem}.question-encoder.{digest}.onnx")


def export(embedder: Embedder, index_path: Path) -> Path | None:
    """The exported encoder beside `index_path`, exported if it is not there yet. None when the
    model is not a transformer with mean pooling (what the export reproduces)."""
    if not embedder.is_sentence_transformer:
        return None
    target = encoder_path(index_path, embedder.identity)
    with _export_lock:
        if target.exists():
            return target
        earlier = _exported.get(embedder.identity)
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        try:
            if earlier is not None and earlier.exists():
                shutil.copyfile(earlier, tmp)
            elif not _export(embedder, tmp):
                return None
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        _exported[embedder.identity] = target
        return target


def _export(embedder: Embedder, path: Path) -> bool:
    import onnx  # only the build exports
    import torch
    from sentence_transformers.models import Normalize, Pooling, Transformer
    from tokenizers import Tokenizer

    model = embedder.load()
    modules = list(model)
    if not (
        isinstance(modules[0], Transformer)
        and len(modules) >= 2
        and isinstance(modules[1], Pooling)
        and _mean_pooling(modules[1].get_config_dict())
        and all(isinstance(m, Normalize) for m in modules[2:])
    ):
        return False
    tokenizer = Tokenizer.from_str(model.tokenizer.backend_tokenizer.to_str())
    tokenizer.enable_truncation(max_length=model.max_seq_length)
    tokenizer.no_padding()

    class MeanPooled(torch.nn.Module):
        def __init__(self, transformer: torch.nn.Module):
            super().__init__()
            self.transformer = transformer

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
        ) -> torch.Tensor:
            tokens = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            return torch.nn.functional.normalize((tokens * mask).sum(1) / mask.sum(1), dim=1)

    sample = model.tokenizer(["a question"], return_tensors="pt")
    axes = {0: "batch", 1: "tokens"}
    # The tracer warns that it fixes the attention mask's branches to the sample's: no padding, which
    # is the only input `OnnxEncoder` ever gives it.
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            MeanPooled(modules[0].auto_model.eval()),
            (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
            str(path),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["embedding"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes},
            opset_version=17,
            dynamo=False,
        )
    exported = onnx.load(str(path))
    exported.metadata_props.add(key=TOKENIZER_KEY, value=tokenizer.to_str())
    onnx.save(exported, str(path))
    return True


def _mean_pooling(config: Mapping[str, object]) -> bool:
    """Mean pooling alone, as sentence-transformers 5 (`pooling_mode`) and 3-4 (flags) write it."""
    if "pooling_mode" in config:
        return config["pooling_mode"] == "mean"
    return [k for k, v in config.items() if k.startswith("pooling_mode_") and v] == ["pooling_mode_mean_tokens"]


class OnnxEncoder:
    """An exported encoder, loaded once, safe from any thread. It is given texts unpadded (the export's
    traced branches assume it): one question, or texts of one token count. `threads`: cores per call
    (a search's one question takes one; the other is ranking by words meanwhile)."""

    def __init__(self, path: Path, threads: int = 1):
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Threads that wait for the next operator sleep rather than spin: on a box whose cores the build's
        # workers and other processes share, a spinning thread burns the core another one needs (a build's
        # 1,475 dev texts on two threads under load: 26.3 CPU-s spinning, 23.1 not, in the same time).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_str(self._session.get_modelmeta().custom_metadata_map[TOKENIZER_KEY])

    def encode(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._run([self._tokenizer.encode(text)])[0]
        return vector

    def encode_batch(self, texts: list[str]) -> np.ndarray:
        """One vector per text, in order; texts of different token counts are run apart, unpadded."""
        encodings = self._tokenizer.encode_batch(texts)
        by_length: dict[int, list[int]] = {}
        for position, encoding in enumerate(encodings):
            by_length.setdefault(len(encoding.ids), []).append(position)
        vectors: list[np.ndarray] = [np.empty(0)] * len(texts)
        for positions in by_length.values():
            for position, vector in zip(positions, self._run([encodings[p] for p in positions]), strict=True):
                vectors[position] = vector
        return np.stack(vectors)

    def _run(self, encodings: list[Encoding]) -> np.ndarray:
        """The vectors of encodings of one token count."""
        feed = {
            name: np.asarray([getattr(encoding, field) for encoding in encodings], dtype=np.int64)
            for name, field in (
                ("input_ids", "ids"),
                ("attention_mask", "attention_mask"),
                ("token_type_ids", "type_ids"),
            )
        }
        vectors: np.ndarray = self._session.run(None, feed)[0]
        return vectors
