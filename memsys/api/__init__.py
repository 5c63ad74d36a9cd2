"""The REST front end (FastAPI), with MCP's streamable HTTP mounted at /mcp."""
