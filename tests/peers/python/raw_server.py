"""A hand-written stdio MCP server (no SDK) for cases an SDK will not produce:
content blocks of unknown future types, an unsupported protocol version, a server that
never answers the handshake, garbage on stdout, and precise control over cancellation.

Usage: raw_server.py [normal|bad-version|hang|garbage|many-tools|huge-catalog|flaky]
Every message received is appended (one JSON per line) to $RAW_LOG when it is set.

Tools: `exotic` (blocks of unknown types), `slow` (answers only when cancelled, with an
error, so the client sees the cancelled request answered), `stuck` (never answers),
`echo`, `big` (`size` characters), `salted` (`size` bytes with $SERVICE_TOKEN every
4 KiB), `leak` ($SERVICE_TOKEN), `die` (exits mid-call),
`deep` (a result nested 100,000 levels deep), `echo_blocks` (returns its `blocks`
argument as its content and its `structured` argument as its structuredContent, as given), `refuse` (a JSON-RPC error whose message
holds $SERVICE_TOKEN), `bad_utf8` (a response line that is not
UTF-8), `oversize` (a result of $RAW_OVERSIZE bytes, default 40 MiB).
`many-tools` lists 10,001 tools; `huge-catalog` lists 100 tools whose descriptions add up
to over 32 MiB. `flaky` also offers resources: its first `resources/list` (while the file
$RAW_MARK does not exist) creates that file and exits, a later one lists `raw://one`.
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
            "capabilities": {"tools": {}, "resources": {}} if MODE == "flaky" else {"tools": {}},
            "serverInfo": {"name": "raw-fixture", "version": "0.0.1"},
        }})
    elif method == "resources/list" and MODE == "flaky":
        mark = os.environ["RAW_MARK"]
        if not os.path.exists(mark):
            open(mark, "w").close()
            sys.exit(3)
        send({"jsonrpc": "2.0", "id": mid, "result": {"resources": [
            {"uri": "raw://one", "name": "one"},
        ]}})
    elif method == "tools/list" and MODE == "many-tools":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(10_001)
        ]}})
    elif method == "tools/list" and MODE == "huge-catalog":
        blob = "d" * (340 * 1024)
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": f"t{i}", "description": blob, "inputSchema": {"type": "object"}} for i in range(100)
        ]}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "exotic", "description": "Returns blocks of unknown types", "inputSchema": {"type": "object"}},
            {"name": "slow", "description": "Answers only when cancelled", "inputSchema": {"type": "object"}},
            {"name": "stuck", "description": "Never answers", "inputSchema": {"type": "object"}},
            {"name": "deep", "description": "Answers with deeply nested JSON", "inputSchema": {"type": "object"}},
            {"name": "bad_utf8", "description": "Answers with bytes that are not UTF-8", "inputSchema": {"type": "object"}},
            {"name": "oversize", "description": "Answers with a huge result", "inputSchema": {"type": "object"}},
            {"name": "refuse", "description": "Answers with a JSON-RPC error naming $SERVICE_TOKEN", "inputSchema": {"type": "object"}},
            {"name": "echo", "description": "Returns its text", "inputSchema": {"type": "object"}},
            {"name": "echo_blocks", "description": "Returns the blocks it is given", "inputSchema": {"type": "object"}},
            {"name": "big", "description": "Returns `size` x characters", "inputSchema": {"type": "object"}},
            {"name": "salted", "description": "Returns `size` bytes with $SERVICE_TOKEN every 4 KiB", "inputSchema": {"type": "object"}},
            {"name": "leak", "description": "Returns $SERVICE_TOKEN", "inputSchema": {"type": "object"}},
            {"name": "die", "description": "Exits mid-call", "inputSchema": {"type": "object"}},
        ]}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "slow":
            pending_slow.add(mid)
        elif name == "stuck":
            pass
        elif name == "deep":
            depth = 100_000
            nested = "[" * depth + "]" * depth
            sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": {"content": [], "structuredContent": {"deep": %s}}}\n' % (json.dumps(mid), nested))
            sys.stdout.flush()
        elif name == "bad_utf8":
            sys.stdout.buffer.write(b'{"jsonrpc": "2.0", "id": ' + json.dumps(mid).encode() + b', "result": {"content": [{"type": "text", "text": "\xff\xfe bad"}]}}\n')
            sys.stdout.buffer.flush()
        elif name == "salted":
            args = msg["params"].get("arguments") or {}
            size = int(args.get("size", 0))
            token = os.environ.get("SERVICE_TOKEN", "")
            block = (token + " " + "line of ordinary text\n" * 4096)[:4096]
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": (block * (size // 4096 + 1))[:size]}]}})
        elif name in ("echo", "big", "leak"):
            args = msg["params"].get("arguments") or {}
            text = {
                "echo": lambda: str(args.get("text", "")),
                "big": lambda: "x" * int(args.get("size", 0)),
                "leak": lambda: "token=" + os.environ.get("SERVICE_TOKEN", ""),
            }[name]()
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
        elif name == "echo_blocks":
            args = msg["params"].get("arguments") or {}
            result = {"content": args.get("blocks", [])}
            if "structured" in args:
                result["structuredContent"] = args["structured"]
            send({"jsonrpc": "2.0", "id": mid, "result": result})
        elif name == "die":
            sys.exit(7)
        elif name == "refuse":
            token = os.environ.get("SERVICE_TOKEN", "")
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32000, "message": f"backend refused token {token}"}})
        elif name == "oversize":
            size = int(os.environ.get("RAW_OVERSIZE", str(40 << 20)))
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "x" * size}]}})
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
