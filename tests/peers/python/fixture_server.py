"""A FastMCP (Python MCP SDK) server for Airlock's integration tests.

Its tools return every content block type, echo a credential from its environment,
report which environment variables it can see, collide after name sanitizing, have
over-long names, fail on purpose, and spawn a grandchild process.
"""

import base64
import json
import os
import subprocess
import sys

import asyncio

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

mcp = FastMCP("airlock-fixture")

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfixture").decode()
WAV = base64.b64encode(b"RIFF0000WAVEfmt fixture").decode()


@mcp.tool()
def echo(text: str) -> str:
    """Returns the text unchanged."""
    return text


@mcp.tool()
def env_names() -> str:
    """Lists the names of the environment variables this server can see."""
    return json.dumps(sorted(os.environ))


@mcp.tool()
def leak_secret() -> str:
    """Prints the service token it was configured with (a badly behaved server)."""
    return "connected with token=" + os.environ.get("SERVICE_TOKEN", "") + " (keep it safe)"


@mcp.tool(structured_output=True)
def structured_secret() -> dict[str, object]:
    """Returns the token inside structured content."""
    return {"token": os.environ.get("SERVICE_TOKEN", ""), "ok": True}


@mcp.tool()
def all_blocks() -> list:
    """Returns one block of every MCP content type."""
    return [
        TextContent(type="text", text="plain text"),
        ImageContent(type="image", data=PNG, mimeType="image/png"),
        AudioContent(type="audio", data=WAV, mimeType="audio/wav"),
        ResourceLink(type="resource_link", uri="file:///srv/report.csv", name="report.csv", mimeType="text/csv"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="mem://notes/1", mimeType="text/plain", text="embedded note"),
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(uri="mem://files/a.pdf", mimeType="application/pdf", blob="JVBERi0="),
        ),
    ]


@mcp.tool()
def fail(reason: str = "the backend said no") -> str:
    """Always fails."""
    raise ValueError(reason)


@mcp.tool()
def big_text(size: int, char: str = "x") -> str:
    """Returns `size` characters."""
    return char * size


@mcp.tool()
def spawn_grandchild() -> str:
    """Starts a long-running child process and returns its pid."""
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return str(child.pid)


@mcp.tool()
async def sleepy(seconds: float) -> str:
    """Sleeps, then answers."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@mcp.tool()
def die() -> str:
    """Exits the server process in the middle of the call."""
    os._exit(1)


@mcp.tool()
async def work_with_progress(steps: int, ctx: Context) -> str:
    """Reports progress `steps` times."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1} of {steps}")
        await asyncio.sleep(0.05)
    return "done"


@mcp.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool called `name` and announces the changed tool list."""

    def added() -> str:
        return f"I am {name}"

    mcp.add_tool(added, name=name, description="Added at runtime")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@mcp.tool()
async def announce_lists(ctx: Context) -> str:
    """Announces that the resource list and the prompt list changed."""
    await ctx.session.send_resource_list_changed()
    await ctx.session.send_prompt_list_changed()
    return "announced"


def read_file_dot() -> str:
    """Tool named `read.file`."""
    return "dot"


def read_file_underscore() -> str:
    """Tool named `read_file`."""
    return "underscore"


def long_named() -> str:
    """A tool whose name is 70 characters long."""
    return "long"


mcp.add_tool(read_file_dot, name="read.file")
mcp.add_tool(read_file_underscore, name="read_file")
mcp.add_tool(long_named, name="t" * 70)

if __name__ == "__main__":
    print("fixture server starting", file=sys.stderr)
    mcp.run("stdio")
