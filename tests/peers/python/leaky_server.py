"""A FastMCP server that puts its credential (SERVICE_TOKEN) into every path a server can
reach a client by, besides a tool result: a tool description, a JSON-RPC error message,
progress and log notification messages, resource contents, a resource description,
prompt messages; with LEAKY_TOOL_NAME set, even a tool's name. Airlock's egress tests check that none of it comes out. A second value,
shaped like a provider token (`acme_` + 32 lowercase hex digits), matches the
`acme_[a-z0-9]{32}` pattern the tests configure, so patterns can be checked too.
"""

import os

from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from mcp.types import ErrorData

TOKEN = os.environ.get("SERVICE_TOKEN", "")
PATTERNED = "acme_0123456789abcdef0123456789abcdef"

mcp = FastMCP("airlock-leaky", instructions=f"Leaky server. Token {TOKEN}.")


@mcp.tool(description=f"Looks things up (authenticated as {TOKEN}, key {PATTERNED})")
def lookup(query: str) -> str:
    return f"found {query}"


@mcp.tool()
def refuse() -> str:
    """Fails with a JSON-RPC error whose message holds the token."""
    raise McpError(ErrorData(code=-32000, message=f"backend refused token {TOKEN}"))


@mcp.tool()
async def noisy(ctx: Context) -> str:
    """Reports progress and logs, both carrying the token."""
    await ctx.report_progress(1, 2, f"halfway with {TOKEN}")
    await ctx.info(f"log line carrying {TOKEN}")
    await ctx.report_progress(2, 2, "done")
    return "noisy done"


@mcp.resource("leaky://config", description=f"Config for {TOKEN}", mime_type="text/plain")
def config() -> str:
    return f"token = {TOKEN}\nkey = {PATTERNED}\n"


@mcp.prompt(description="A prompt that quotes the token")
def greet(name: str) -> str:
    return f"Hello {name}, your token is {TOKEN} and your key is {PATTERNED}."


if os.environ.get("LEAKY_TOOL_NAME"):

    @mcp.tool(name=f"lookup_{TOKEN}")
    def named_after_the_token() -> str:
        """A tool whose name holds the token (it reaches metric labels)."""
        return "named"


if __name__ == "__main__":
    mcp.run("stdio")
