"""The embedding queue's worker: embeds chunks that index_directory stored without vectors.

It runs as a daemon thread inside long-lived processes (`memsys serve`, `memsys mcp`). Rows
are claimed with FOR UPDATE SKIP LOCKED, so several processes may drain one queue.
"""

from __future__ import annotations

import logging
import threading

from memsys.db import session_scope
from memsys.services import embedding_queue

log = logging.getLogger(__name__)


class EmbeddingWorker:
    def __init__(self, batch: int = embedding_queue.EMBED_BATCH, idle_seconds: float = 5.0) -> None:
        self.batch = batch
        self.idle_seconds = idle_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:
        with session_scope() as session:
            return embedding_queue.embed_pending(session, limit=self.batch)

    def drain(self) -> int:
        total = 0
        while not self._stop.is_set():
            done = self.run_once()
            if not done:
                break
            total += done
        return total

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self.drain()
                failures = 0
            except Exception:  # keep serving: the queue survives in the database
                if self._stop.is_set():  # its statement cancelled by the stop (db.cancel_running)
                    return
                failures += 1
                log.exception("embedding worker failed; retrying")
            self._wake.wait(self.idle_seconds * (2 ** min(failures, 5)))
            self._wake.clear()

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="memsys-embed", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stopping(self) -> None:
        """Ask the worker to stop after what it does now (`stop` waits for it)."""
        self._stop.set()
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


_worker: EmbeddingWorker | None = None


def worker() -> EmbeddingWorker:
    global _worker
    if _worker is None:
        _worker = EmbeddingWorker()
    return _worker


def running() -> bool:
    """Whether this process has a worker draining the queue (`memsys serve`, `memsys mcp`)."""
    return _worker is not None and _worker.running()
