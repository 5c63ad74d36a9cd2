"""The `memsys` command line (typer)."""
