"""A test server on the official Python SDK 2.x (`MCPServer`), which speaks 2026-07-28
and every handshake-era revision.

Usage:
    modern_server.py stdio
    modern_server.py http PORT      stateless streamable HTTP on 127.0.0.1:PORT/mcp

Tools: `echo`, `leak_secret` (returns SERVICE_TOKEN), `traceparent` (the W3C trace
context its request carried in `_meta`), `nag` (asks on every round, never finishes), `grow` (adds a tool and says so on the
`subscriptions/listen` streams), `touch` (says `note://readme` changed, on the
streams subscribed to it), and
`confirm`, which asks its user
a question through a resolver: a mid-call elicitation request on a handshake-era
connection, an `input_required` result on a 2026-07-28 one. The question carries
SERVICE_TOKEN, so a test can see that it was redacted on its way to the user.
A resource `note://readme` and a prompt `greet`.
"""

import os
import sys
from typing import Annotated

from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from pydantic import BaseModel

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ToolsListChanged

TOKEN = os.environ.get("SERVICE_TOKEN", "")

# The subscriptions/listen fan-out (2026-07-28): `grow` publishes its change here.
bus = InMemorySubscriptionBus()

mcp = MCPServer("modern", subscriptions=bus)


class Approval(BaseModel):
    ok: bool


@mcp.tool()
def echo(text: str) -> str:
    """Echoes its text."""
    return text


@mcp.tool()
def leak_secret() -> str:
    """Returns the service token (Airlock must redact it)."""
    return "connected with token=" + TOKEN + " (keep it safe)"


def ask(action: str) -> Elicit[Approval]:
    return Elicit(f"Really {action}? (asked with token {TOKEN})", Approval)


@mcp.tool()
def confirm(action: str, answer: Annotated[Approval, Resolve(ask)]) -> str:
    """Asks the user to confirm an action, then says what they answered."""
    return f"{action}: {'approved' if answer.ok else 'refused'}"


@mcp.tool()
def traceparent(ctx: Context) -> str:
    """Returns the W3C traceparent the request carried in its _meta (or "none")."""
    meta = ctx.request_context.meta
    found = meta.get("traceparent") if isinstance(meta, dict) else getattr(meta, "traceparent", None)
    if found is None and meta is not None:
        dumped = meta.model_dump(by_alias=True) if hasattr(meta, "model_dump") else {}
        found = dumped.get("traceparent")
    return found or "none"


@mcp.tool()
def nag(action: str) -> str | InputRequiredResult:
    """Asks "Again?" on every round and never finishes (a server that keeps asking)."""
    question = ElicitRequest(
        params=ElicitRequestFormParams(
            message=f"Again {action}?",
            requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
        )
    )
    return InputRequiredResult(input_requests={"again": question}, request_state="nagging")


@mcp.tool()
async def grow(name: str) -> str:
    """Adds a tool `grown_NAME` and tells listening clients that the tool list changed."""

    def grown() -> str:
        return "grown"

    mcp.add_tool(grown, name=f"grown_{name}")
    await bus.publish(ToolsListChanged())
    return f"added grown_{name}"


@mcp.tool()
async def touch() -> str:
    """Tells listening clients subscribed to `note://readme` that it changed."""
    await bus.publish(ResourceUpdated(uri="note://readme"))
    return "touched note://readme"


@mcp.resource("note://readme")
def readme() -> str:
    """A note."""
    return "the readme says hello"


@mcp.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return f"Say hello to {name}."


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        mcp.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            stateless_http=True,
        )
    else:
        mcp.run("stdio")
