"""The MCP server: Cleanroom's tools for any assistant that speaks the Model Context Protocol.

Built on the official `mcp` SDK and implemented once as a client of Cleanroom's own HTTP API with the caller's
personal API token (the assistant scope), so every permission, visibility and gate is the API's:
- `tools/`      the tools (one module per group, each registering its own), their models (the API's schemas), the
                one renderer, and the run-file resources (`cleanroom://runs/{id}/files/{name}`);
- `contract.py` the sandbox contract, sent as the server's instructions;
- `api.py`      the typed client the tools use (`backend.client` with the caller's token: the API's schemas
                back), and how API refusals become tool errors;
- `http.py`     streamable HTTP at `/mcp` on the API server (the caller's bearer token, in-process calls);

The stdio command, `cleanroom mcp --api URL` (token from CLEANROOM_TOKEN), is backend/cli/mcp.py with the other
commands; its benchmark (`cleanroom bench mcp`) is backend/benches/mcp.py.
"""
