"""The handshake-era twin of tests/peers/python-modern/modern_server.py, on the Python
SDK 1.x (FastMCP): it knows nothing of 2026-07-28 (it answers `server/discover` with
"method not found"), and asks its question with a mid-call `elicitation/create`.

Tools `echo`, `leak_secret` (SERVICE_TOKEN) and `confirm` (a question carrying
SERVICE_TOKEN); resource `note://readme`; prompt `greet`. Runs over stdio.
"""

import os

from pydantic import BaseModel

from mcp.server.fastmcp import Context, FastMCP

TOKEN = os.environ.get("SERVICE_TOKEN", "")

mcp = FastMCP("handshake")


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


@mcp.tool()
async def confirm(action: str, ctx: Context) -> str:
    """Asks the user to confirm an action, then says what they answered."""
    answer = await ctx.elicit(f"Really {action}? (asked with token {TOKEN})", Approval)
    ok = answer.action == "accept" and answer.data.ok
    return f"{action}: {'approved' if ok else 'refused'}"


@mcp.resource("note://readme")
def readme() -> str:
    """A note."""
    return "the readme says hello"


@mcp.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return f"Say hello to {name}."


if __name__ == "__main__":
    mcp.run("stdio")
