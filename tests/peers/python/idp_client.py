"""An MCP client written with the official Python SDK that signs in to `airlock serve
--http` by itself: it sends its first request without a token, follows the 401's
`resource_metadata` to the identity provider (RFC 9728, RFC 8414), gets an access token
with the client credentials grant for the gateway's resource (RFC 8707), then lists and
calls tools. Prints one JSON report (the Rust test in tests/identity.rs asserts on it).

Usage:
    idp_client.py URL ISSUER CLIENT_ID CLIENT_SECRET SCOPE TOOL ARGUMENTS_JSON
"""

import asyncio
import json
import sys

import httpx
from mcp import ClientSession
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


class Memory:
    """Tokens kept in memory for this run only."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.info = client_info


async def main() -> None:
    url, issuer, client_id, secret, scope, tool, arguments = sys.argv[1:8]
    storage = Memory()
    auth = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=storage,
        client_id=client_id,
        client_secret=secret,
        scopes=scope,
        issuer=issuer,
    )
    statuses: list[int] = []

    async def seen(response: httpx.Response) -> None:
        if str(response.request.url).startswith(url):
            statuses.append(response.status_code)

    async with httpx.AsyncClient(auth=auth, event_hooks={"response": [seen]}, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool(tool, json.loads(arguments))
    text = "".join(block.text for block in result.content if block.type == "text")
    print(
        json.dumps(
            {
                "tools": sorted(t.name for t in tools.tools),
                "text": text,
                "is_error": bool(result.isError),
                "first_status": statuses[0] if statuses else None,
                "token_type": storage.tokens.token_type if storage.tokens else None,
                "signed_in": storage.tokens is not None,
            }
        )
    )


asyncio.run(main())
