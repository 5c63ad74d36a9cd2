"""Settings read from the environment (prefix MEMSYS_)."""

import logging
import os
from functools import lru_cache
from pathlib import Path

import platformdirs
from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from memsys.errors import BadSetting

log = logging.getLogger(__name__)


def _default_home() -> Path:
    return Path(platformdirs.user_data_dir("memsys"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMSYS_", extra="ignore")

    home: Path = Field(default_factory=_default_home)
    # Any PostgreSQL >= 15 with pgvector >= 0.7. Unset: the embedded server under `home`.
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8700, ge=1, le=65_535)
    # Required (as a Bearer token on every request) when serving on a non-loopback address.
    api_token: str | None = None

    # Limits, documented in the README.
    max_content_chars: int = Field(default=32_000, ge=1, le=10_000_000)
    max_file_bytes: int = Field(default=20 * 1024 * 1024, ge=1, le=2**40)
    max_query_chars: int = Field(default=4_000, ge=1, le=1_000_000)
    # The largest snapshot POST /v1/import takes as its body (spooled to a temporary file
    # while it arrives): a client sending for ever no longer fills the server's disk.
    max_import_bytes: int = Field(default=4 * 1024**3, ge=1, le=2**50)
    # A document chunk's size: by default the text the embedding model reads in one pass (254
    # tokens: its 256-token window less [CLS] and [SEP]). Up to 256 is accepted as before; a
    # chunk over 254 is embedded from pieces (memsys.whole_text), as any longer text is.
    chunk_max_tokens: int = Field(default=254, ge=16, le=256)

    # Retrieval knobs: candidates each channel brings (at least the call's top_k), and the
    # HNSW search's breadth (pgvector's range).
    candidate_pool: int = Field(default=60, ge=1, le=1_000)
    hnsw_ef_search: int = Field(default=100, ge=1, le=1_000)

    # No call waits forever (seconds; 0 = no limit): a statement running longer — waiting for
    # a lock another transaction holds included — is cancelled and its transaction rolled
    # back, with an error that says so. The lock limit (off by default) ends lock waits
    # sooner: a long import or indexing run holds its namespace's term statistics until it
    # commits, and writers to that namespace queue behind it. Migrations (index builds) are
    # exempt from the statement limit.
    statement_timeout_s: float = Field(default=300.0, ge=0, le=2_000_000)
    lock_timeout_s: float = Field(default=0.0, ge=0, le=2_000_000)
    # How long a write waits for an import (or an index_directory run) that writes alone in
    # its namespace before it is refused with "busy, try again" (errors.Busy): a small import
    # ends within it, a large one runs for minutes. 0: refused at once.
    busy_wait_s: float = Field(default=10.0, ge=0, le=2_000_000)

    # The context-assembly debugger: how long traces are kept (`memsys maintain` prunes older
    # ones; 0 keeps them for good) and when monitoring raises an alert (S004's thresholds).
    trace_retention_days: int = Field(default=30, ge=0, le=36_500)
    alert_latency_p95_ms: float = Field(default=800.0, ge=0, le=3_600_000)
    alert_verification_failure_rate: float = Field(default=0.02, ge=0, le=1)
    alert_mode_accuracy: float = Field(default=0.85, ge=0, le=1)
    alert_context_bug_rate: float = Field(default=0.30, ge=0, le=1)

    # auto | onnx | sentence-transformers (memsys/embeddings.py).
    embedding_provider: str = "auto"

    # Folders index_file / index_directory may read, separated by os.pathsep. Unset: the
    # user's home and the working directory; empty: indexing is off. `memsys serve` on a
    # non-loopback address sets it empty unless it is configured (no remote file reads).
    index_roots: str | None = None
    # The folders among those that scoped tokens may read too (index, import or diff by
    # path), separated by os.pathsep. Unset or empty: none — a file on the memsys host is
    # every tenant's, so only the admin (and the local user) reads them unless the operator
    # names folders every token may use. A folder outside index_roots is ignored.
    token_index_roots: str | None = None

    # The namespace of the knowledge-graph tools (create_entities, …) when a call names none.
    graph_namespace: str = "global"

    # True: a CLI command runs in process even when a `memsys serve` on the same home could
    # answer (memsys.cli.remote). A setting like the others, so that `true` counts and a
    # value that is no boolean is refused rather than taken silently as "no".
    cli_local: bool = False

    # An OpenAI-compatible endpoint (e.g. http://127.0.0.1:11434/v1) for extracting entities
    # and relations from episodes; unset (the default): the rule-based extractor only.
    extractor_url: str | None = None
    extractor_model: str = "gpt-4o-mini"
    extractor_api_key: str | None = None
    extractor_timeout: float = Field(default=30.0, gt=0, le=3_600)

    def allowed_roots(self) -> list[Path]:
        if self.index_roots is None:
            return [Path.home().resolve(), Path.cwd().resolve()]
        return [root for p in self.index_roots.split(os.pathsep) if p for root in _resolved(p)]

    def token_roots(self) -> list[Path]:
        """The folders a scoped token may read: token_index_roots within allowed_roots."""
        return self._token_roots(inside=True)

    def ignored_token_roots(self) -> list[Path]:
        """The folders of token_index_roots outside allowed_roots: opened to no token."""
        return self._token_roots(inside=False)

    def _token_roots(self, inside: bool) -> list[Path]:
        allowed = self.allowed_roots()
        given = [
            r for p in (self.token_index_roots or "").split(os.pathsep) if p for r in _resolved(p)
        ]
        return [r for r in given if any(r == a or r.is_relative_to(a) for a in allowed) == inside]

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"


# MEMSYS_ variables read outside Settings: the ONNX file's folder, the test suite's database.
_READ_ELSEWHERE = ("MEMSYS_MODEL_DIR", "MEMSYS_TEST_DATABASE_URL")


@lru_cache
def get_settings() -> Settings:
    """The settings; a variable that does not parse is refused by name (BadSetting: its
    value is not shown, it may be a secret), one memsys does not know is logged (a
    misspelling would otherwise be ignored without a word)."""
    for name in unknown_variables():
        log.warning("%s is not a memsys setting and is ignored (README: Configuration)", name)
    try:
        return Settings()
    except ValidationError as exc:
        problems = [
            f"MEMSYS_{'_'.join(str(part) for part in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors()
        ]
        raise BadSetting(f"{'; '.join(problems)} (README: Configuration)") from None


def unknown_variables() -> list[str]:
    known = {f"MEMSYS_{name.upper()}" for name in Settings.model_fields} | set(_READ_ELSEWHERE)
    # pydantic-settings reads names in any case: memsys_port is MEMSYS_PORT.
    return sorted(
        n for n in os.environ if n.upper().startswith("MEMSYS_") and n.upper() not in known
    )


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(extra: list[str] | None = None) -> list[str]:
    """Host headers the HTTP server answers (REST and /mcp alike): loopback names with and
    without a port, plus the address `memsys serve --host` binds when it is not loopback."""
    hosts = [h for name in LOOPBACK_NAMES for h in (name, f"{name}:*")]
    return hosts + list(extra or [])


def allowed_origins(extra: list[str] | None = None) -> list[str]:
    """Browser origins allowed to call: pages served from loopback (or the bound host)."""
    names = [*LOOPBACK_NAMES, *(h for h in extra or [] if not h.endswith(":*"))]
    return [f"{scheme}://{name}:*" for name in names for scheme in ("http", "https")] + [
        f"{scheme}://{name}" for name in names for scheme in ("http", "https")
    ]


def _resolved(path: str) -> list[Path]:
    """A configured folder with its links followed; none when they loop (nothing is in it)."""
    try:
        return [Path(path).expanduser().resolve()]
    except (OSError, RuntimeError):
        return []
