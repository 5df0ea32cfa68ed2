"""An upstream MCP server (FastMCP, streamable HTTP) that shows which bearer token each
tool call arrived with, for Airlock's token exchange tests.

Usage: bearer_server.py --port PORT [--log FILE]
Binds 127.0.0.1 only (PORT 0 picks a free port) and, once ready, prints exactly one line
`LISTENING http://127.0.0.1:<port>/mcp` to stdout. Exits cleanly on SIGTERM.

Any request to /mcp without `Authorization: Bearer ...` gets 401 with
`WWW-Authenticate: Bearer`; tokens are not otherwise checked (no signature check).
Tool `whoami` (no arguments) returns, as JSON text, the claims `sub`, `aud`, `act` and
`client_id` of the JWT carried by the HTTP request that delivered that tools/call (each
missing claim is null; a token that is not a JWT gives all nulls). --log appends one JSON
line per tools/call: {"sub": ..., "aud": ..., "token_sha256": <hex SHA-256 of the raw token>}.
"""

import argparse
import base64
import hashlib
import json
import signal
import socket
import sys

import anyio
import uvicorn
from mcp.server.fastmcp import Context, FastMCP
from starlette.responses import JSONResponse

ARGS = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ARGS.add_argument("--port", type=int, required=True, help="port on 127.0.0.1; 0 picks a free one")
ARGS.add_argument("--log", metavar="FILE", help="append one JSON line per tools/call to FILE")
OPTS = ARGS.parse_args()

SOCK = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
SOCK.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
SOCK.bind(("127.0.0.1", OPTS.port))
URL = f"http://127.0.0.1:{SOCK.getsockname()[1]}/mcp"

mcp = FastMCP("airlock-bearer", host="127.0.0.1", log_level="WARNING")  # serves /mcp


def bearer_of(headers) -> str:
    auth = headers.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


def claims_of(token: str) -> dict:
    """The JWT payload, unverified; {} when the token is not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


@mcp.tool()
def whoami(ctx: Context) -> str:
    """The sub, aud, act and client_id claims of the bearer token this call carried."""
    request = ctx.request_context.request
    token = bearer_of(request.headers) if request is not None else ""
    claims = claims_of(token)
    if OPTS.log:
        line = {"sub": claims.get("sub"), "aud": claims.get("aud"),
                "token_sha256": hashlib.sha256(token.encode()).hexdigest()}
        with open(OPTS.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
    return json.dumps({k: claims.get(k) for k in ("sub", "aud", "act", "client_id")})


def guarded(app):
    """ASGI middleware: 401 to any /mcp request without a bearer token."""

    async def middleware(scope, receive, send):
        if scope["type"] == "http" and (scope["path"] == "/mcp" or scope["path"].startswith("/mcp/")):
            auth = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            if not auth.lower().startswith("bearer ") or not auth[7:].strip():
                response = JSONResponse(
                    {"error": "invalid_request", "error_description": "a bearer token is required"},
                    401, headers={"WWW-Authenticate": "Bearer"})
                return await response(scope, receive, send)
        return await app(scope, receive, send)

    return middleware


async def main():
    config = uvicorn.Config(guarded(mcp.streamable_http_app()), log_level="warning",
                            access_log=False, timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM while serving, then re-raises it; this handler makes that (and
    # a SIGTERM before startup) a clean stop with exit status 0.
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [SOCK])
        while not server.started and not server.should_exit:
            await anyio.sleep(0.02)
        if server.started:
            print(f"LISTENING {URL}", flush=True)


if __name__ == "__main__":
    anyio.run(main)
    sys.exit(0)
