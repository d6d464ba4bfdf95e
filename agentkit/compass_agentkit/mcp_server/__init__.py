"""compass-mcp: Compass as an MCP server (see cli.py to run it, tools.py for
its tools, session.py for its one agent session on the relay)."""
