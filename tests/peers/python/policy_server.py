"""A FastMCP server for the policy tests: tools that say what arguments reached them,
one annotated destructive and one read-only, and a log of every call that arrived (the
file named by $POLICY_CALL_LOG), so a test can prove a denied call never got here.
"""

import json
import os

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

mcp = FastMCP("airlock-policy-peer")


def arrived(tool: str, arguments: dict) -> str:
    line = json.dumps({"tool": tool, "arguments": arguments}, sort_keys=True)
    log = os.environ.get("POLICY_CALL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    return line


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(path: str) -> str:
    """Reads a note (says which arguments arrived)."""
    return arrived("read_note", {"path": path})


@mcp.tool(annotations=ToolAnnotations(destructiveHint=True))
def wipe_notes(folder: str, force: bool = False) -> str:
    """Deletes every note in a folder (says which arguments arrived)."""
    return arrived("wipe_notes", {"folder": folder})


@mcp.tool()
def run(command: str, dry_run: bool = False) -> str:
    """Runs a command (says which arguments arrived)."""
    return arrived("run", {"command": command, "dry_run": dry_run})


@mcp.tool()
def secret_report() -> str:
    """Returns text holding the service's token."""
    return arrived("secret_report", {}) + " token=" + os.environ.get("SERVICE_TOKEN", "")


if __name__ == "__main__":
    mcp.run()
