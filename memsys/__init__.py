"""memsys: long-term memory for LLM agents on one PostgreSQL database."""

__version__ = "0.1.0"
