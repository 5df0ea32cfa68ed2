"""A hand-written stdio MCP server (no SDK) for cases an SDK will not produce:
content blocks of unknown future types, an unsupported protocol version, a server that
never answers the handshake, garbage on stdout.

Usage: raw_server.py [normal|bad-version|hang|garbage]
"""

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "normal"


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    method = msg.get("method")
    mid = msg.get("id")
    if method == "initialize":
        if MODE == "hang":
            continue
        version = "1999-01-01" if MODE == "bad-version" else msg["params"]["protocolVersion"]
        if MODE == "garbage":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-fixture", "version": "0.0.1"},
        }})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "exotic", "description": "Returns blocks of unknown types", "inputSchema": {"type": "object"}},
        ]}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [
            {"type": "text", "text": "before"},
            {"type": "hologram", "depth": 3, "uri": "holo://cube"},
            {"type": "text", "text": "after"},
        ]}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})
