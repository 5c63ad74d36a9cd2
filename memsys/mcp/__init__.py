"""The MCP front end: server.py holds the only SDK import; tools.py the tools."""
