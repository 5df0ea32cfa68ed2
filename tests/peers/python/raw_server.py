"""A hand-written stdio MCP server (no SDK) for cases an SDK will not produce:
content blocks of unknown future types, an unsupported protocol version, a server that
never answers the handshake, garbage on stdout, and precise control over cancellation.

Usage: raw_server.py [normal|bad-version|hang|garbage]
Every message received is appended (one JSON per line) to $RAW_LOG when it is set.

Tools: `exotic` (blocks of unknown types), `slow` (answers only when cancelled, with an
error, so the client sees the cancelled request answered), `stuck` (never answers).
"""

import json
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "normal"
LOG = os.environ.get("RAW_LOG")
pending_slow = set()


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(msg):
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps(msg) + "\n")


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    log(msg)
    method = msg.get("method")
    mid = msg.get("id")
    if method == "initialize":
        if MODE == "hang":
            continue
        version = "1999-01-01" if MODE == "bad-version" else msg["params"]["protocolVersion"]
        if MODE == "garbage":
            sys.stdout.write("this is not json\n")
            sys.stdout.write("{\"jsonrpc\": \"2.0\", \"broken\n")
            sys.stdout.flush()
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-fixture", "version": "0.0.1"},
        }})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "exotic", "description": "Returns blocks of unknown types", "inputSchema": {"type": "object"}},
            {"name": "slow", "description": "Answers only when cancelled", "inputSchema": {"type": "object"}},
            {"name": "stuck", "description": "Never answers", "inputSchema": {"type": "object"}},
        ]}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "slow":
            pending_slow.add(mid)
        elif name == "stuck":
            pass
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [
                {"type": "text", "text": "before"},
                {"type": "hologram", "depth": 3, "uri": "holo://cube"},
                {"type": "text", "text": "after"},
            ]}})
    elif method == "notifications/cancelled":
        rid = msg.get("params", {}).get("requestId")
        if rid in pending_slow:
            pending_slow.discard(rid)
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32800, "message": "request cancelled"}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})
