"""An MCP client written with the official Python SDK, driving `airlock serve` the way a
real client would, and printing one JSON report of what it saw (the Rust test asserts on
the report).

Usage:
    gateway_client.py SCENARIO --stdio COMMAND [ARGS...]
    gateway_client.py SCENARIO --http URL [--token TOKEN]

Scenarios:
    full    tools, a redacted secret, progress, paging a large result with
            airlock_output, a cancelled call, resources, prompts, and a tools/list_changed
            after an upstream change. Expects services `fx` (fixture_server.py with
            SERVICE_TOKEN set), `raw` (raw_server.py) and `every` (server-everything).
    hidden  the tools this agent sees, and what a call to `mcp__fx__echo` answers
            (for grants-mode tests).
    approve two calls of `mcp__p__wipe_notes` that a policy asks about: the client
            answers the elicitation yes, then no, and reports the questions it saw.
    remember the same two calls; the client answers the first question yes, remembered
            for any arguments for one hour, so the second call is not asked about.
    nobody  the same call from a client that does not answer elicitation.
"""

import asyncio
import json
import sys
from datetime import timedelta

import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


def text_of(result):
    return "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")


async def full(session, notes):
    report = {}
    tools = await session.list_tools()
    report["tools"] = sorted(t.name for t in tools.tools)

    leaked = await session.call_tool("mcp__fx__leak_secret", {})
    report["leak"] = {"text": text_of(leaked), "is_error": leaked.isError, "meta": leaked.meta}

    progress = []

    async def on_progress(value, total, message):
        progress.append([value, total, message])

    worked = await session.call_tool(
        "mcp__fx__work_with_progress", {"steps": 3}, progress_callback=on_progress
    )
    report["progress"] = {"seen": progress, "text": text_of(worked)}

    size = 100_000
    big = await session.call_tool("mcp__fx__big_text", {"size": size, "char": "é"})
    meta = big.meta or {}
    pages, text, offset = 0, "", 0
    while True:
        page = await session.call_tool(
            "airlock_output",
            {"service": meta.get("service"), "output_id": meta.get("output_id"), "offset": offset},
        )
        pages += 1
        structured = page.structuredContent or {}
        text += structured.get("text", "")
        if structured.get("eof") or pages > 50:
            break
        offset = structured["next_offset"]
    report["paging"] = {
        "meta": meta,
        "first_blocks": len(big.content),
        "last_block": big.content[-1].text if big.content else "",
        "pages": pages,
        "chars": len(text),
        "all_expected": set(text) == {"é"},
    }

    request_id = session._request_id
    slow = asyncio.create_task(session.call_tool("mcp__raw__slow", {}))
    await asyncio.sleep(0.5)
    await session.send_notification(
        types.ClientNotification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=request_id, reason="test")
            )
        )
    )
    await asyncio.sleep(1.0)
    report["cancelled"] = {"request_id": request_id, "done": slow.done()}
    slow.cancel()

    resources = await session.list_resources()
    report["resources"] = [str(r.uri) for r in resources.resources][:50]
    if resources.resources:
        first = resources.resources[0]
        read = await session.read_resource(first.uri)
        report["read"] = {"uri": str(first.uri), "contents": len(read.contents)}
    prompts = await session.list_prompts()
    report["prompts"] = [p.name for p in prompts.prompts]
    simple = [p for p in prompts.prompts if not p.arguments]
    if simple:
        got = await session.get_prompt(simple[0].name, {})
        report["prompt"] = {"name": simple[0].name, "messages": len(got.messages)}

    notes.clear()
    await session.call_tool("mcp__fx__grow", {"name": "added_tool"})
    def notified():
        return "notifications/tools/list_changed" in notes

    for _ in range(50):
        if notified():
            break
        await asyncio.sleep(0.1)
    after = await session.list_tools()
    report["list_changed"] = {
        "notified": notified(),
        "added": "mcp__fx__added_tool" in {t.name for t in after.tools},
    }

    unknown = await session.call_tool("mcp__nope__nothing", {})
    report["unknown"] = {"is_error": unknown.isError, "meta": unknown.meta, "text": text_of(unknown)}
    return report


async def hidden(session, notes):
    tools = await session.list_tools()
    call = await session.call_tool("mcp__fx__echo", {"text": "hi"})
    return {
        "tools": sorted(t.name for t in tools.tools),
        "call": {"is_error": call.isError, "meta": call.meta, "text": text_of(call)},
    }


async def wipe_twice(session, notes):
    calls = []
    for folder in ["/tmp/first", "/tmp/second"]:
        result = await session.call_tool("mcp__p__wipe_notes", {"folder": folder})
        calls.append({"is_error": result.isError, "text": text_of(result)})
    return {"calls": calls}


async def run(scenario, session_factory):
    notes = []
    questions = []
    answers = [True, False]

    async def on_message(message):
        if isinstance(message, types.ServerNotification):
            notes.append(message.root.method)

    async def on_elicit(context, params):
        questions.append({"message": params.message, "schema": params.requestedSchema})
        if scenario == "remember":
            content = {"approve": True, "remember": "any arguments", "remember_hours": 1}
        else:
            content = {"approve": answers.pop(0) if answers else False}
        return types.ElicitResult(action="accept", content=content)

    extra = {"elicitation_callback": on_elicit} if scenario in ("approve", "remember") else {}
    body_of = {
        "full": full,
        "hidden": hidden,
        "approve": wipe_twice,
        "remember": wipe_twice,
        "nobody": wipe_twice,
    }[scenario]
    async with session_factory() as (read, write):
        async with ClientSession(
            read,
            write,
            message_handler=on_message,
            read_timeout_seconds=timedelta(seconds=60),
            **extra,
        ) as session:
            init = await session.initialize()
            report = {"server": init.serverInfo.name, "instructions": init.instructions}
            body = await body_of(session, notes)
            body["questions"] = questions
            report.update(body)
            return report


def main():
    scenario, mode = sys.argv[1], sys.argv[2]
    if mode == "--stdio":
        params = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])

        def factory():
            return stdio_client(params)

    else:
        url = sys.argv[3]
        headers = {}
        if len(sys.argv) > 5 and sys.argv[4] == "--token":
            headers["Authorization"] = f"Bearer {sys.argv[5]}"

        class Http:
            def __init__(self):
                self.cm = streamablehttp_client(url, headers=headers)

            async def __aenter__(self):
                read, write, _ = await self.cm.__aenter__()
                return read, write

            async def __aexit__(self, *exc):
                return await self.cm.__aexit__(*exc)

        factory = Http
    report = asyncio.run(run(scenario, factory))
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
