"""The handshake-era twin of tests/peers/python-modern/modern_server.py, on the Python
SDK 1.x (FastMCP): it knows nothing of 2026-07-28 (it answers `server/discover` with
"method not found"), and asks its question with a mid-call `elicitation/create`.

Tools `echo`, `leak_secret` (SERVICE_TOKEN), `confirm` (a question carrying
SERVICE_TOKEN) and `sign_in` (a URL-mode elicitation sending the user to
`https://SITE.example/login`); resource `note://readme`; prompt `greet`. Runs over stdio.
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


@mcp.tool()
async def sign_in(site: str, ctx: Context) -> str:
    """Sends the user to the site's sign-in page (URL-mode elicitation); says how it went."""
    url = f"https://{site}.example/login"
    try:
        answer = await ctx.elicit_url("Sign in to continue", url, "sign-in-1")
    except Exception as e:  # the client (or Airlock's policy) refused to ask
        return f"sign-in refused: {e}"
    return f"sign-in: {answer.action}"


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
