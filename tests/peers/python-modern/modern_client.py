"""An MCP client on the official Python SDK 2.x (`mcp.Client`), driving `airlock serve`
as a new user's agent would, and printing one JSON report of what it saw (the Rust
tests assert on the report).

Usage:
    modern_client.py MODE SERVICES --stdio COMMAND [ARGS...]
    modern_client.py MODE SERVICES --http URL [--token TOKEN]

MODE is the SDK's own: `auto` (probe `server/discover`, fall back to `initialize`),
`2026-07-28` (adopt it without a probe) or `legacy` (the `initialize` handshake).

SERVICES `listen:NAME` instead: open a `subscriptions/listen` stream for tool list
changes, call NAME's `grow`, and report whether the change arrived and the new tool is
listed. SERVICES `updates:NAME`: subscribe to NAME's `note://readme` on a listen stream,
call NAME's `touch`, and report whether the update arrived.

The walk: list tools, resources and prompts; then for each of SERVICES (comma-separated
service names, each fronting a twin of modern_server.py): call its `leak_secret`, read its
`note://readme` (exposed as `airlock://SERVICE/...`), get its `greet` prompt, and call its
`confirm`, answering the question it asks with yes (the questions seen are reported). A
step that fails is reported with its error, and the walk goes on.
"""

import asyncio
import json
import os
import sys

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def text_of(blocks):
    return "\n".join(b.text for b in blocks if getattr(b, "type", "") == "text")


async def step(report, name, job):
    try:
        report[name] = await job()
    except Exception as e:  # reported, not raised: the test names the failing step
        report[name] = {"error": f"{type(e).__name__}: {e}"}


async def walk(client, services, questions):
    report = {"protocol_version": client.protocol_version, "services": {}}

    async def tools():
        listed = await client.list_tools()
        return [t.name for t in listed.tools]

    await step(report, "tools", tools)

    async def resources():
        listed = await client.list_resources()
        return [str(r.uri) for r in listed.resources]

    await step(report, "resources", resources)

    async def prompts():
        listed = await client.list_prompts()
        return [p.name for p in listed.prompts]

    await step(report, "prompts", prompts)

    for service in services:
        seen = report["services"][service] = {}

        async def leak():
            result = await client.call_tool(f"mcp__{service}__leak_secret", {})
            return {"text": text_of(result.content), "is_error": result.is_error}

        await step(seen, "leak", leak)

        async def resource():
            # A URI several services offer is exposed as airlock://SERVICE/...
            uri = next(u for u in report["resources"] if u.startswith(f"airlock://{service}/"))
            read = await client.read_resource(uri)
            return {"uri": uri, "text": "\n".join(getattr(c, "text", "") for c in read.contents)}

        await step(seen, "resource", resource)

        async def prompt():
            got = await client.get_prompt(f"{service}__greet", {"name": "Ada"})
            return {"text": text_of(m.content for m in got.messages)}

        await step(seen, "prompt", prompt)

        async def confirm():
            questions.clear()
            result = await client.call_tool(f"mcp__{service}__confirm", {"action": "wipe"})
            return {"text": text_of(result.content), "is_error": result.is_error, "questions": list(questions)}

        await step(seen, "confirm", confirm)
    return report


async def listen_for_growth(client, service):
    """Listens for tool list changes, has `service` grow a tool, and reports whether the
    change arrived and the new tool is listed."""
    report = {"protocol_version": client.protocol_version}
    async with client.listen(tools_list_changed=True) as subscription:
        report["honored"] = bool(subscription.honored.tools_list_changed)
        await client.call_tool(f"mcp__{service}__grow", {"name": "fresh"})
        try:
            with anyio.fail_after(30):
                event = await subscription.__anext__()
            report["event"] = type(event).__name__
        except TimeoutError:
            report["event"] = None
    listed = await client.list_tools()
    report["grown"] = f"mcp__{service}__grown_fresh" in [t.name for t in listed.tools]
    return report


async def listen_for_update(client, service):
    """Subscribes to `service`'s `note://readme` on a listen stream, has `service` touch
    it, and reports whether the update arrived, and for which URI."""
    report = {"protocol_version": client.protocol_version}
    listed = await client.list_resources()
    uris = [str(r.uri) for r in listed.resources if str(r.uri).startswith(f"airlock://{service}/")]
    report["uri"] = uris[0] if uris else None
    async with client.listen(resource_subscriptions=uris) as subscription:
        report["honored"] = list(subscription.honored.resource_subscriptions or [])
        touched = await client.call_tool(f"mcp__{service}__touch", {})
        report["touched"] = text_of(touched.content)
        try:
            with anyio.fail_after(30):
                event = await subscription.__anext__()
            report["event"] = type(event).__name__
            report["updated"] = getattr(event, "uri", None)
        except TimeoutError:
            report["event"] = None
    return report


async def main(argv):
    mode, services = argv[0], argv[1].split(",")
    argv = argv[1:]
    how = argv[1]
    questions = []

    async def on_elicit(_ctx, params):
        questions.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    if how == "--stdio":
        # The gateway inherits this environment (the test's plugin cache and config).
        server = StdioServerParameters(command=argv[2], args=argv[3:], env=dict(os.environ))
    else:
        url = argv[2]
        headers = {}
        if "--token" in argv:
            headers["Authorization"] = "Bearer " + argv[argv.index("--token") + 1]
        server = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    async with Client(server, mode=mode, elicitation_callback=on_elicit, cache=None) as client:
        if services[0].startswith("listen:"):
            report = await listen_for_growth(client, services[0].split(":", 1)[1])
        elif services[0].startswith("updates:"):
            report = await listen_for_update(client, services[0].split(":", 1)[1])
        else:
            report = await walk(client, services, questions)
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
