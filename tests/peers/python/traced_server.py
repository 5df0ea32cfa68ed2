"""A FastMCP server over streamable HTTP (127.0.0.1:$PORT/mcp) that records the W3C
trace context each tool call arrives with — the `traceparent` HTTP header and
`_meta.traceparent` — as one JSON line per call in $TRACE_LOG. Its tools return and fail
with the credential it expects ($SERVICE_TOKEN), so Airlock's telemetry tests can check
that the secret reaches no span.
"""

import json
import os

from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from mcp.types import ErrorData

TOKEN = os.environ["SERVICE_TOKEN"]
mcp = FastMCP("airlock-traced", host="127.0.0.1", port=int(os.environ["PORT"]))


def record(ctx: Context) -> None:
    request = ctx.request_context.request
    header = request.headers.get("traceparent") if request is not None else None
    meta = ctx.request_context.meta
    in_meta = (meta.model_extra or {}).get("traceparent") if meta is not None else None
    with open(os.environ["TRACE_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"header": header, "meta": in_meta}) + "\n")


@mcp.tool()
def reveal(ctx: Context) -> str:
    """Returns the server's credential (a badly behaved server)."""
    record(ctx)
    return f"the key is {TOKEN}"


@mcp.tool()
def refuse(ctx: Context) -> str:
    """Fails with a JSON-RPC error whose message holds the credential."""
    record(ctx)
    raise McpError(ErrorData(code=-32000, message=f"backend refused {TOKEN}"))


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
