"""The MCP front end: server.py holds the only SDK import and builds the tools from the
operation table (memsys.operations)."""
