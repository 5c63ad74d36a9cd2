"""Settings read from the environment (prefix MEMSYS_)."""

from functools import lru_cache
from pathlib import Path

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_home() -> Path:
    return Path(platformdirs.user_data_dir("memsys"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMSYS_", extra="ignore")

    home: Path = Field(default_factory=_default_home)
    # Any PostgreSQL >= 15 with pgvector >= 0.7. Unset: the embedded server under `home`.
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8700
    # Required (as a Bearer token on every request) when serving on a non-loopback address.
    api_token: str | None = None

    # Limits, documented in the README.
    max_content_chars: int = 32_000
    max_file_bytes: int = 20 * 1024 * 1024
    max_query_chars: int = 4_000
    chunk_max_tokens: int = 256

    # Retrieval knobs.
    rrf_k: int = 60
    candidate_pool: int = 60
    hnsw_ef_search: int = 100

    # auto | onnx | sentence-transformers (memsys/embeddings.py).
    embedding_provider: str = "auto"

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"


@lru_cache
def get_settings() -> Settings:
    return Settings()
