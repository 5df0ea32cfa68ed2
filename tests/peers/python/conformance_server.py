"""Conformance reference server: the MCP server Airlock fronts when the official MCP
conformance suite (`@modelcontextprotocol/conformance`, server mode) is run against it.

What it is for
--------------
The conformance suite's *server* scenarios connect to a streamable-HTTP MCP endpoint and
call tools, resources and prompts with fixed names (`test_simple_text`,
`test://static-text`, `test_prompt_with_arguments`, ...), expecting fixed behaviours
(progress notifications, log messages, a sampling request to the client, elicitation
with particular schemas, ...). Airlock is a gateway, not a server with tools of its own,
so to run the suite against `airlock serve --http` we put this server behind it: Airlock
launches it over stdio and re-exposes its tools/resources/prompts under their raw names,
forwarding sampling, elicitation, logging, progress and roots in both directions.
Every name and result here follows what the server scenarios of conformance 0.1.13 check
(`node .../conformance/dist/index.js list --server`); each tool, resource and prompt names
its scenario in its docstring.

Usage
-----
    python conformance_server.py              # stdio (how Airlock launches it)
    python conformance_server.py --http 3001  # streamable HTTP on http://127.0.0.1:3001/mcp

HTTP mode exists so the server can be validated with the suite directly, without Airlock:

    node tests/peers/node_modules/@modelcontextprotocol/conformance/dist/index.js \
        server --url http://127.0.0.1:3001/mcp

It binds 127.0.0.1 only, with the SDK's DNS-rebinding protection on (Host and Origin must
be localhost / 127.0.0.1 / [::1]), an in-memory event store so SSE streams can be resumed
with Last-Event-ID, and a 100 ms SSE `retry` hint (for the SSE polling scenario).

Written against the Python MCP SDK pinned in requirements.txt (mcp==1.30.0), with
FastMCP where it can express the behaviour, and the low-level server underneath it for
logging/setLevel, resources/(un)subscribe and the `resources.subscribe` capability.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import logging
import struct
import sys
import wave
import weakref
import zlib
from collections import deque
from typing import Annotated, Any

from pydantic import Field

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.prompts.base import Message, UserMessage
from mcp.server.session import ServerSession
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.message import ServerMessageMetadata

logger = logging.getLogger("conformance_server")

SERVER_NAME = "airlock-conformance-reference"
WATCHED_URI = "test://watched-resource"  # the resource the subscribe scenarios use


# ---------------------------------------------------------------------------
# Test media, built here rather than pasted in, so they are known to be valid files.
# ---------------------------------------------------------------------------


def _png_1x1_red() -> bytes:
    """A valid 1x1 PNG with one red pixel (8-bit RGB)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # width, height, depth 8, RGB
    idat = zlib.compress(b"\x00\xff\x00\x00")  # filter byte 0, then one red pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _wav_silence() -> bytes:
    """A valid, tiny WAV file: 8 samples of 16-bit mono silence at 8 kHz."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 8)
    return buf.getvalue()


PNG_BYTES = _png_1x1_red()
PNG_B64 = base64.b64encode(PNG_BYTES).decode()
WAV_B64 = base64.b64encode(_wav_silence()).decode()


# ---------------------------------------------------------------------------
# Event store (SSE resumability, SEP-1699). Only used in --http mode: with it the SDK sends
# a priming event (id + empty data) first on every POST SSE stream, lets a tool close its
# stream mid-call (ctx.close_sse_stream()), and replays the missed events when the client
# reconnects with GET + Last-Event-ID.
# ---------------------------------------------------------------------------


class InMemoryEventStore(EventStore):
    """Keeps the last `max_events` SSE events in memory, in order."""

    def __init__(self, max_events: int = 10_000) -> None:
        self._events: deque[tuple[str, str, types.JSONRPCMessage | None]] = deque(maxlen=max_events)
        self._counter = 0

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        self._counter += 1
        event_id = str(self._counter)
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream_id = next((s for s, e, _ in self._events if e == last_event_id), None)
        if stream_id is None:
            return None
        after = int(last_event_id)
        for s, e, message in list(self._events):
            # message None is a priming event: nothing to replay.
            if s == stream_id and int(e) > after and message is not None:
                await send_callback(EventMessage(message, e))
        return stream_id


# ---------------------------------------------------------------------------
# The server object.
# ---------------------------------------------------------------------------

# Tools whose inputSchema must be sent exactly as written, not as FastMCP derives it from
# the Python signature (json-schema-2020-12 checks that $schema, $defs and
# additionalProperties survive the trip to the client).
RAW_INPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "json_schema_2020_12_tool": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
        },
        "additionalProperties": False,
    }
}


class ConformanceFastMCP(FastMCP):
    """FastMCP with hand-written input schemas for the tools in RAW_INPUT_SCHEMAS."""

    async def list_tools(self) -> list[types.Tool]:
        tools = await super().list_tools()
        for tool in tools:
            if tool.name in RAW_INPUT_SCHEMAS:
                tool.inputSchema = RAW_INPUT_SCHEMAS[tool.name]
        return tools


mcp = ConformanceFastMCP(
    SERVER_NAME,
    instructions="Reference server for the MCP conformance suite (server scenarios).",
    # HTTP mode only (ignored over stdio): see InMemoryEventStore.
    event_store=InMemoryEventStore(),
    retry_interval=100,
    log_level="WARNING",
)

# The low-level server FastMCP wraps; used for the handlers FastMCP has no decorator for.
lowlevel = mcp._mcp_server  # noqa: SLF001 (no public accessor in mcp 1.30)


# ---------------------------------------------------------------------------
# Per-session state: the log level a client set, and the resources it subscribed to.
# Keyed weakly by the session so state dies with the connection.
# ---------------------------------------------------------------------------

LOG_LEVELS: list[str] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
_session_log_level: weakref.WeakKeyDictionary[ServerSession, str] = weakref.WeakKeyDictionary()
_session_subscriptions: weakref.WeakKeyDictionary[ServerSession, set[str]] = weakref.WeakKeyDictionary()


async def send_log(ctx: Context, level: types.LoggingLevel, message: str) -> None:
    """Send notifications/message unless the client asked (logging/setLevel) for a higher
    minimum level. A client that never set a level gets everything."""
    minimum = _session_log_level.get(ctx.session, "debug")
    if LOG_LEVELS.index(level) < LOG_LEVELS.index(minimum):
        return
    await ctx.session.send_log_message(
        level=level, data=message, logger=SERVER_NAME, related_request_id=ctx.request_id
    )


@lowlevel.set_logging_level()
async def handle_set_level(level: types.LoggingLevel) -> None:
    """logging/setLevel: remember the minimum level for this session; answers {}."""
    _session_log_level[lowlevel.request_context.session] = level


@lowlevel.subscribe_resource()
async def handle_subscribe(uri: Any) -> None:
    """resources/subscribe: track the URI for this session; answers {}."""
    _session_subscriptions.setdefault(lowlevel.request_context.session, set()).add(str(uri))


@lowlevel.unsubscribe_resource()
async def handle_unsubscribe(uri: Any) -> None:
    """resources/unsubscribe: stop tracking the URI for this session; answers {}."""
    _session_subscriptions.get(lowlevel.request_context.session, set()).discard(str(uri))


# mcp 1.30's low-level server always advertises resources.subscribe=false, even with a
# subscribe handler registered. Advertise what we actually support.
_sdk_get_capabilities = lowlevel.get_capabilities


def _get_capabilities(notification_options: Any, experimental_capabilities: dict[str, dict[str, Any]]):
    caps = _sdk_get_capabilities(notification_options, experimental_capabilities)
    if caps.resources is not None and types.SubscribeRequest in lowlevel.request_handlers:
        caps.resources.subscribe = True
    return caps


lowlevel.get_capabilities = _get_capabilities  # type: ignore[method-assign]


def tool_error(text: str) -> types.CallToolResult:
    """A tool-level error result (isError: true), as opposed to a JSON-RPC error."""
    return types.CallToolResult(isError=True, content=[types.TextContent(type="text", text=text)])


def client_supports(ctx: Context, capability: types.ClientCapabilities) -> bool:
    return ctx.session.check_client_capability(capability)


# ---------------------------------------------------------------------------
# Tools. structured_output=False everywhere: the scenarios expect plain content blocks,
# exactly as written in their descriptions, without a generated outputSchema.
# ---------------------------------------------------------------------------


@mcp.tool(structured_output=False)
def test_simple_text() -> str:
    """Returns one text block (scenario tools-call-simple-text)."""
    return "This is a simple text response for testing."


@mcp.tool(structured_output=False)
def test_image_content() -> list[types.ContentBlock]:
    """Returns one image block, a 1x1 red PNG (scenario tools-call-image)."""
    return [types.ImageContent(type="image", data=PNG_B64, mimeType="image/png")]


@mcp.tool(structured_output=False)
def test_audio_content() -> list[types.ContentBlock]:
    """Returns one audio block, a tiny audio/wav file (scenario tools-call-audio)."""
    return [types.AudioContent(type="audio", data=WAV_B64, mimeType="audio/wav")]


@mcp.tool(structured_output=False)
def test_embedded_resource() -> list[types.ContentBlock]:
    """Returns one embedded text resource (scenario tools-call-embedded-resource)."""
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://embedded-resource",
                mimeType="text/plain",
                text="This is an embedded resource content.",
            ),
        )
    ]


@mcp.tool(structured_output=False)
def test_multiple_content_types() -> list[types.ContentBlock]:
    """Returns text, image and embedded resource blocks together (scenario tools-call-mixed-content)."""
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG_B64, mimeType="image/png"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://mixed-content-resource",
                mimeType="application/json",
                text=json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
            ),
        ),
    ]


@mcp.tool(structured_output=False)
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log notifications ~50 ms apart while it runs (scenario tools-call-with-logging)."""
    await send_log(ctx, "info", "Tool execution started")
    await asyncio.sleep(0.05)
    await send_log(ctx, "info", "Tool processing data")
    await asyncio.sleep(0.05)
    await send_log(ctx, "info", "Tool execution completed")
    return "Tool with logging executed successfully"


@mcp.tool(structured_output=False)
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100, ~50 ms apart, when the call carries
    _meta.progressToken (scenario tools-call-with-progress)."""
    # report_progress is a no-op without a progress token, as the scenario requires.
    await ctx.report_progress(progress=0, total=100, message="Completed step 0 of 100")
    await asyncio.sleep(0.05)
    await ctx.report_progress(progress=50, total=100, message="Completed step 50 of 100")
    await asyncio.sleep(0.05)
    await ctx.report_progress(progress=100, total=100, message="Completed step 100 of 100")
    meta = ctx.request_context.meta
    token = meta.progressToken if meta is not None else None
    return f"Tool with progress executed successfully (progressToken={token!r})"


@mcp.tool(structured_output=False)
async def test_sampling(
    prompt: Annotated[str, Field(description="The prompt to send to the LLM")], ctx: Context
) -> str | types.CallToolResult:
    """Asks the client for an LLM completion (sampling/createMessage) of the prompt and
    returns its text (scenario tools-call-sampling)."""
    if not client_supports(ctx, types.ClientCapabilities(sampling=types.SamplingCapability())):
        return tool_error("Client does not support sampling (no sampling capability)")
    result = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else json.dumps(content.model_dump(mode="json"))
    return f"LLM response: {text}"


async def elicit_raw(ctx: Context, message: str, schema: dict[str, Any]) -> types.ElicitResult:
    """elicitation/create (form mode) with a schema sent exactly as written. FastMCP's
    ctx.elicit() derives the schema from a Pydantic model and cannot express defaults
    this precisely, nor oneOf/anyOf/enumNames/array enums."""
    return await ctx.session.elicit_form(message=message, requestedSchema=schema, related_request_id=ctx.request_id)


def elicitation_supported(ctx: Context) -> bool:
    return client_supports(ctx, types.ClientCapabilities(elicitation=types.ElicitationCapability()))


@mcp.tool(structured_output=False)
async def test_elicitation(
    message: Annotated[str, Field(description="The message to show the user")], ctx: Context
) -> str | types.CallToolResult:
    """Asks the client for a username and an email (elicitation/create) and returns the
    answer (scenario tools-call-elicitation)."""
    if not elicitation_supported(ctx):
        return tool_error("Client does not support elicitation (no elicitation capability)")
    result = await elicit_raw(
        ctx,
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={result.action}, content={json.dumps(result.content or {})}"


@mcp.tool(structured_output=False)
async def test_elicitation_sep1034_defaults(ctx: Context) -> str | types.CallToolResult:
    """Elicits with a default value on every primitive type: string, integer, number,
    enum and boolean (scenario elicitation-sep1034-defaults)."""
    if not elicitation_supported(ctx):
        return tool_error("Client does not support elicitation (no elicitation capability)")
    result = await elicit_raw(
        ctx,
        "Please review and update the form fields with defaults",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            },
        },
    )
    return f"Elicitation completed: action={result.action}, content={json.dumps(result.content or {})}"


@mcp.tool(structured_output=False)
async def test_elicitation_sep1330_enums(ctx: Context) -> str | types.CallToolResult:
    """Elicits with all five enum schema variants: untitled and titled single-select,
    legacy enumNames, untitled and titled multi-select (scenario elicitation-sep1330-enums)."""
    if not elicitation_supported(ctx):
        return tool_error("Client does not support elicitation (no elicitation capability)")
    result = await elicit_raw(
        ctx,
        "Please select options from the enum fields",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Untitled single-select enum",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Titled single-select enum",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Legacy titled enum (deprecated enumNames)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Untitled multi-select enum",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Titled multi-select enum",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
        },
    )
    return f"Elicitation completed: action={result.action}, content={json.dumps(result.content or {})}"


@mcp.tool(structured_output=False)
def test_error_handling() -> types.CallToolResult:
    """Always fails with a tool error, isError: true (scenario tools-call-error)."""
    return tool_error("This tool intentionally returns an error for testing")


@mcp.tool(structured_output=False)
async def test_reconnection(ctx: Context) -> str:
    """Closes its own SSE stream mid-call, then answers, so the client must reconnect with
    Last-Event-ID to get the result (scenario server-sse-polling; HTTP mode only: over
    stdio there is no stream to close and it just answers)."""
    await send_log(ctx, "info", "Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)  # give the client time to notice and reconnect
    await send_log(ctx, "info", "After reconnect")
    return "Reconnection test completed"


@mcp.tool(structured_output=False)
def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    """Tool with JSON Schema 2020-12 features (scenario json-schema-2020-12; its inputSchema
    is RAW_INPUT_SCHEMAS["json_schema_2020_12_tool"], not derived from this signature)."""
    return f"Received: name={json.dumps(name)}, address={json.dumps(address)}"


# --- Extras, not used by the conformance suite: they let Airlock's own tests exercise
# --- roots and resource-update forwarding through the gateway with this same server.


@mcp.tool(structured_output=False)
async def test_list_roots(ctx: Context) -> str | types.CallToolResult:
    """Asks the client for its roots (roots/list) and returns them as JSON. Not a
    conformance scenario; for testing roots forwarding."""
    if not client_supports(ctx, types.ClientCapabilities(roots=types.RootsCapability())):
        return tool_error("Client does not support roots (no roots capability)")
    result = await ctx.session.send_request(
        types.ServerRequest(types.ListRootsRequest()),
        types.ListRootsResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )
    return json.dumps([root.model_dump(mode="json", exclude_none=True) for root in result.roots])


@mcp.tool(structured_output=False)
async def test_update_watched_resource(ctx: Context) -> str:
    """Sends notifications/resources/updated for test://watched-resource if this session
    subscribed to it. Not a conformance scenario; for testing subscription forwarding."""
    if WATCHED_URI not in _session_subscriptions.get(ctx.session, set()):
        return "not subscribed: no notification sent"
    await ctx.session.send_resource_updated(WATCHED_URI)  # type: ignore[arg-type]
    return "notifications/resources/updated sent for " + WATCHED_URI


# ---------------------------------------------------------------------------
# Resources.
# ---------------------------------------------------------------------------

@mcp.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource (scenario resources-read-text)."""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource, a 1x1 PNG, read as a base64 blob (scenario resources-read-binary)."""
    return PNG_BYTES


@mcp.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> str:  # noqa: A002 (the template variable is called id)
    """A resource template; {id} is substituted into the content (scenario resources-templates-read)."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


@mcp.resource(WATCHED_URI, name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients can subscribe to (scenarios resources-subscribe, resources-unsubscribe)."""
    return "Watched resource content"


# ---------------------------------------------------------------------------
# Prompts.
# ---------------------------------------------------------------------------


@mcp.prompt()
def test_simple_prompt() -> list[Message]:
    """A simple prompt without arguments (scenario prompts-get-simple)."""
    return [UserMessage(types.TextContent(type="text", text="This is a simple prompt for testing."))]


@mcp.prompt()
def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> list[Message]:
    """A prompt with two required arguments substituted into its text (scenario prompts-get-with-args)."""
    return [UserMessage(types.TextContent(type="text", text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


@mcp.prompt()
def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],  # noqa: N803 (wire name)
) -> list[Message]:
    """A prompt whose first message embeds a resource (scenario prompts-get-embedded-resource)."""
    return [
        UserMessage(
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=resourceUri, mimeType="text/plain", text="Embedded resource content for testing."
                ),
            )
        ),
        UserMessage(types.TextContent(type="text", text="Please process the embedded resource above.")),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[Message]:
    """A prompt whose first message is an image (scenario prompts-get-with-image)."""
    return [
        UserMessage(types.ImageContent(type="image", data=PNG_B64, mimeType="image/png")),
        UserMessage(types.TextContent(type="text", text="Please analyze the image above.")),
    ]


# ---------------------------------------------------------------------------
# Completions (scenario completion-complete asks for ref/prompt
# test_prompt_with_arguments, argument arg1, value "test").
# ---------------------------------------------------------------------------

COMPLETION_CANDIDATES: dict[tuple[str, str, str], list[str]] = {
    ("ref/prompt", "test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test", "testValue1"],
    ("ref/prompt", "test_prompt_with_arguments", "arg2"): ["world", "testValue2"],
    ("ref/resource", "test://template/{id}/data", "id"): ["123", "456", "789"],
}


@mcp.completion()
async def complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: types.CompletionContext | None,
) -> types.Completion:
    """completion/complete: candidates that start with what was typed so far."""
    key_name = ref.name if isinstance(ref, types.PromptReference) else ref.uri
    candidates = COMPLETION_CANDIDATES.get((ref.type, key_name, argument.name), [])
    values = [v for v in candidates if v.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), hasMore=False)


# ---------------------------------------------------------------------------
# Entry point.
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="serve streamable HTTP on http://127.0.0.1:PORT/mcp instead of stdio",
    )
    args = parser.parse_args(argv)

    # stdout carries the protocol over stdio: diagnostics go to stderr only.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    if args.http is None:
        mcp.run("stdio")
    else:
        # Host stays 127.0.0.1 (FastMCP's default), which also turns on the SDK's
        # DNS-rebinding protection (localhost Host/Origin only).
        mcp.settings.port = args.http
        mcp.run("streamable-http")


if __name__ == "__main__":
    main()
