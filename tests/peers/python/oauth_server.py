"""A real local OAuth 2.1 authorization server and OAuth-protected MCP server in one
process, for Airlock's OAuth integration tests (MCP authorization spec 2025-06-18).

Usage: oauth_server.py --port PORT [--token-ttl SECS] [--log FILE]
                       [--client ID:SECRET]... [--cimd URL=FILE]... [--cc-client ID:SECRET]...
                       [--cc-jwt ID=PUBLIC_KEY_PEM_FILE]...
Binds 127.0.0.1 only (PORT 0 picks a free port) and, once ready, prints exactly one line
`LISTENING http://127.0.0.1:<port>/mcp` to stdout. Exits cleanly on SIGTERM.

Endpoints: /.well-known/oauth-protected-resource[/mcp] (RFC 9728),
/.well-known/oauth-authorization-server and /.well-known/openid-configuration (RFC 8414),
/register (RFC 7591), /authorize (auto-approves as user alice; PKCE S256 required),
/token (authorization_code, refresh_token and client_credentials grants; refresh tokens
rotate; client_credentials clients authenticate with a secret or a private_key_jwt
assertion, which must be signed by their key, aimed at the issuer, short-lived and never
replayed), /admin/revoke?client_id=ID (forgets a client and every token it holds), and /mcp,
a FastMCP streamable-HTTP server with tools `whoami` and `echo`, which answers 401 to any
request without a live access token. Access tokens last --token-ttl seconds (default 3600).
--log appends one line per request (method, path, status, and the grant type for /token);
it never contains tokens, codes, verifiers or query strings.

--client pre-registers a confidential client (any loopback redirect URI, RFC 8252);
--cimd accepts URL as a client ID metadata document client, with FILE standing for the
document the server would fetch (its redirect_uris are checked, loopback ports aside).
"""

import argparse
import base64
import hashlib
import re
import secrets
import signal
import socket
import sys
import time
from urllib.parse import urlencode

import json

import anyio
import jwt
import uvicorn
from mcp.server.fastmcp import FastMCP
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse

ARGS = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ARGS.add_argument("--port", type=int, required=True, help="port on 127.0.0.1; 0 picks a free one")
ARGS.add_argument("--token-ttl", type=int, default=3600, metavar="SECS", help="access token lifetime (default 3600)")
ARGS.add_argument("--log", metavar="FILE", help="append one line per HTTP request to FILE (no secrets)")
ARGS.add_argument("--client", action="append", default=[], metavar="ID:SECRET", help="a pre-registered client")
ARGS.add_argument("--cimd", action="append", default=[], metavar="URL=FILE", help="a client ID metadata document")
ARGS.add_argument("--cc-client", action="append", default=[], metavar="ID:SECRET", help="a client-credentials client")
ARGS.add_argument("--cc-jwt", action="append", default=[], metavar="ID=PEM_FILE", help="a private_key_jwt client")
OPTS = ARGS.parse_args()

SOCK = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
SOCK.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
SOCK.bind(("127.0.0.1", OPTS.port))
ISSUER = f"http://127.0.0.1:{SOCK.getsockname()[1]}"
RESOURCE = ISSUER + "/mcp"
RESOURCE_METADATA_URL = ISSUER + "/.well-known/oauth-protected-resource/mcp"
AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic", "private_key_jwt"]
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
VERIFIER = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")

clients = {}  # client_id -> registered metadata (plus client_secret when confidential)
codes = {}  # code -> {client_id, redirect_uri, challenge, scope, expires}
access_tokens = {}  # token -> expiry time
refresh_tokens = {}  # token -> {client_id, scope}
issued = 0  # access tokens issued so far
seen_jti = set()  # client assertions already used
token_owner = {}  # access token -> client_id

for spec in OPTS.client:
    cid, _, secret = spec.partition(":")
    clients[cid] = {"client_id": cid, "client_secret": secret, "redirect_uris": ["http://127.0.0.1/callback"],
                    "loopback": True, "grant_types": ["authorization_code", "refresh_token"]}
for spec in OPTS.cimd:
    url, _, path = spec.partition("=")
    with open(path) as f:
        doc = json.load(f)
    clients[url] = {"client_id": url, "redirect_uris": doc["redirect_uris"], "loopback": True,
                    "grant_types": ["authorization_code", "refresh_token"]}
for spec in OPTS.cc_client:
    cid, _, secret = spec.partition(":")
    clients[cid] = {"client_id": cid, "client_secret": secret, "grant_types": ["client_credentials"]}
for spec in OPTS.cc_jwt:
    cid, _, path = spec.partition("=")
    with open(path) as f:
        clients[cid] = {"client_id": cid, "public_key": f.read(), "grant_types": ["client_credentials"]}


def redirect_allowed(client, uri):
    """Registered redirect URIs match exactly; for loopback clients the port may differ."""
    if uri in client["redirect_uris"]:
        return True
    if client.get("loopback") and uri:
        return re.sub(r"^http://127\.0\.0\.1:\d+/", "http://127.0.0.1/", uri) in [
            re.sub(r"^http://127\.0\.0\.1(:\d+)?/", "http://127.0.0.1/", u) for u in client["redirect_uris"]]
    return False

mcp = FastMCP("airlock-oauth-fixture", host="127.0.0.1", log_level="WARNING")  # serves /mcp


@mcp.tool()
def whoami() -> str:
    """Names the signed-in user and how many access tokens have been issued so far."""
    return f"user: alice; token-generation: {issued}"


@mcp.tool()
def client() -> str:
    """Names the client the current access token was issued to."""
    from mcp.server.lowlevel.server import request_ctx
    headers = request_ctx.get().request.headers
    token = headers.get("authorization", "")[7:].strip()
    return f"client: {token_owner.get(token, '?')}"


@mcp.tool()
def echo(text: str) -> str:
    """Returns the text unchanged."""
    return text


def error(code, description, status=400, headers=None):
    """An RFC 6749 error response."""
    body = {"error": code, "error_description": description}
    return JSONResponse(body, status, headers={"Cache-Control": "no-store", **(headers or {})})


@mcp.custom_route("/.well-known/oauth-protected-resource", methods=["GET"])
@mcp.custom_route("/.well-known/oauth-protected-resource/mcp", methods=["GET"])
async def resource_metadata(request: Request):
    return JSONResponse({"resource": RESOURCE, "authorization_servers": [ISSUER]})


@mcp.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])
@mcp.custom_route("/.well-known/openid-configuration", methods=["GET"])
async def server_metadata(request: Request):
    return JSONResponse({
        "issuer": ISSUER,
        "authorization_endpoint": ISSUER + "/authorize",
        "token_endpoint": ISSUER + "/token",
        "registration_endpoint": ISSUER + "/register",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "token_endpoint_auth_signing_alg_values_supported": ["ES256", "RS256"],
        "client_id_metadata_document_supported": bool(OPTS.cimd),
    })


@mcp.custom_route("/register", methods=["POST"])
async def register(request: Request):
    try:
        meta = await request.json()
    except ValueError:
        return error("invalid_client_metadata", "body is not JSON")
    uris = meta.get("redirect_uris") if isinstance(meta, dict) else None
    if not uris or not isinstance(uris, list) or not all(
            isinstance(u, str) and re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", u) for u in uris):
        return error("invalid_redirect_uri", "redirect_uris must be a non-empty list of absolute URIs")
    meta.setdefault("token_endpoint_auth_method", "client_secret_basic")  # RFC 7591 default
    meta.setdefault("grant_types", ["authorization_code"])
    meta.setdefault("response_types", ["code"])
    if meta["token_endpoint_auth_method"] not in AUTH_METHODS:
        return error("invalid_client_metadata", "unsupported token_endpoint_auth_method")
    meta["client_id"] = "client-" + secrets.token_hex(8)
    meta["client_id_issued_at"] = int(time.time())
    if meta["token_endpoint_auth_method"] != "none":
        meta["client_secret"] = secrets.token_urlsafe(24)
        meta["client_secret_expires_at"] = 0
    clients[meta["client_id"]] = meta
    return JSONResponse(meta, 201, headers={"Cache-Control": "no-store"})


@mcp.custom_route("/authorize", methods=["GET"])
async def authorize(request: Request):
    q = request.query_params
    client = clients.get(q.get("client_id", ""))
    if client is None:
        return error("invalid_client", "unknown client_id")
    redirect_uri = q.get("redirect_uri")
    if not redirect_allowed(client, redirect_uri):
        return error("invalid_request", "redirect_uri is not registered for this client")
    if q.get("response_type") != "code":
        return error("unsupported_response_type", "response_type must be code")
    if not q.get("code_challenge") or q.get("code_challenge_method") != "S256":
        return error("invalid_request", "a PKCE code_challenge with method S256 is required")
    if q.get("resource") not in (None, RESOURCE):
        return error("invalid_target", "unknown resource")
    code = secrets.token_urlsafe(24)
    codes[code] = {"client_id": client["client_id"], "redirect_uri": redirect_uri, "challenge": q["code_challenge"],
                   "scope": q.get("scope") or "mcp", "expires": time.time() + 60}
    params = {"code": code, **({"state": q["state"]} if "state" in q else {})}
    sep = "&" if "?" in redirect_uri else "?"
    return RedirectResponse(redirect_uri + sep + urlencode(params), 302)


def authenticate_client(request: Request, form):
    """The registered client making a token request, or None (RFC 6749 section 2.3;
    RFC 7523 for private_key_jwt assertions)."""
    if form.get("client_assertion_type") == JWT_BEARER:
        assertion = form.get("client_assertion", "")
        try:
            unverified = jwt.decode(assertion, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        client = clients.get(unverified.get("sub", ""))
        if client is None or "public_key" not in client or form.get("client_id") not in (None, client["client_id"]):
            return None
        try:
            claims = jwt.decode(assertion, client["public_key"], algorithms=["ES256", "RS256"],
                                audience=[ISSUER, ISSUER + "/"], issuer=client["client_id"],
                                options={"require": ["exp", "iat", "jti", "sub"]})
        except jwt.PyJWTError:
            return None
        if claims["exp"] - claims["iat"] > 300 or claims["jti"] in seen_jti:
            return None
        seen_jti.add(claims["jti"])
        return client
    client_id, secret = form.get("client_id"), form.get("client_secret")
    basic = request.headers.get("authorization", "")
    if basic.lower().startswith("basic "):
        try:
            client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
        except ValueError:
            return None
    client = clients.get(client_id or "")
    if client and "public_key" in client:
        return None  # a key-bound client must present an assertion
    if client and "client_secret" in client and not secrets.compare_digest(secret or "", client["client_secret"]):
        return None
    return client


def issue_tokens(client_id, scope, refresh=True):
    global issued
    issued += 1
    access = secrets.token_urlsafe(32)
    access_tokens[access] = time.time() + OPTS.token_ttl
    token_owner[access] = client_id
    body = {"access_token": access, "token_type": "Bearer", "expires_in": OPTS.token_ttl, "scope": scope}
    if refresh:
        body["refresh_token"] = secrets.token_urlsafe(32)
        refresh_tokens[body["refresh_token"]] = {"client_id": client_id, "scope": scope}
    return JSONResponse(body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})


@mcp.custom_route("/token", methods=["POST"])
async def token(request: Request):
    form = await request.form()
    grant = form.get("grant_type")
    known = grant in ("authorization_code", "refresh_token", "client_credentials")
    request.scope["log_note"] = "grant_type=" + (grant if known else "unsupported")
    client = authenticate_client(request, form)
    if client is None:
        return error("invalid_client", "client authentication failed", 401, {"WWW-Authenticate": "Basic"})
    if form.get("resource") not in (None, RESOURCE):
        return error("invalid_target", "unknown resource")
    if grant == "authorization_code":
        entry = codes.pop(form.get("code", ""), None)  # single use, even when the rest fails
        if entry is None or entry["expires"] < time.time() or entry["client_id"] != client["client_id"]:
            return error("invalid_grant", "authorization code is invalid, expired or used")
        if form.get("redirect_uri", entry["redirect_uri"]) != entry["redirect_uri"]:
            return error("invalid_grant", "redirect_uri does not match the authorization request")
        verifier = form.get("code_verifier", "")
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        if not VERIFIER.match(verifier) or not secrets.compare_digest(digest, entry["challenge"]):
            return error("invalid_grant", "PKCE code_verifier does not match the code_challenge")
        return issue_tokens(client["client_id"], entry["scope"])
    if grant == "refresh_token":
        entry = refresh_tokens.get(form.get("refresh_token", ""))
        if entry is None or entry["client_id"] != client["client_id"]:
            return error("invalid_grant", "refresh token is invalid")
        scope = form.get("scope") or entry["scope"]
        if not set(scope.split()) <= set(entry["scope"].split()):
            return error("invalid_scope", "scope exceeds the original grant")
        del refresh_tokens[form["refresh_token"]]  # rotate
        return issue_tokens(client["client_id"], scope)
    if grant == "client_credentials":
        if "client_credentials" not in client.get("grant_types", []):
            return error("unauthorized_client", "this client may not use client_credentials")
        return issue_tokens(client["client_id"], form.get("scope") or "mcp", refresh=False)
    return error("unsupported_grant_type", "grant_type must be authorization_code, refresh_token or client_credentials")


@mcp.custom_route("/admin/revoke", methods=["POST"])
async def revoke(request: Request):
    """Forgets a client and every token it holds (a revoked client)."""
    cid = request.query_params.get("client_id", "")
    clients.pop(cid, None)
    for token in [t for t, owner in token_owner.items() if owner == cid]:
        access_tokens.pop(token, None)
        token_owner.pop(token, None)
    for token in [t for t, e in refresh_tokens.items() if e["client_id"] == cid]:
        del refresh_tokens[token]
    return JSONResponse({"revoked": cid})


def guarded(app):
    """ASGI middleware: logs each request and demands a live bearer token on /mcp."""

    async def middleware(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        logged = False

        def log(status):
            nonlocal logged
            if OPTS.log and not logged:
                note = " " + scope["log_note"] if "log_note" in scope else ""
                with open(OPTS.log, "a") as f:
                    f.write(f"{scope['method']} {scope['path']}{note} -> {status}\n")
            logged = True

        async def logging_send(message):
            if message["type"] == "http.response.start":
                log(message["status"])
            await send(message)

        response = app
        if scope["path"] == "/mcp" or scope["path"].startswith("/mcp/"):
            auth = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            challenge = f'Bearer resource_metadata="{RESOURCE_METADATA_URL}"'
            if not auth.lower().startswith("bearer "):  # RFC 6750 section 3.1: no error code
                response = error("invalid_request", "a bearer token is required", 401,
                                 {"WWW-Authenticate": challenge})
            elif access_tokens.get(auth[7:].strip(), 0) < time.time():
                response = error("invalid_token", "the access token is invalid or expired", 401,
                                 {"WWW-Authenticate": challenge + ', error="invalid_token"'})
        try:
            await response(scope, receive, logging_send)
        finally:
            log("closed")

    return middleware


async def main():
    config = uvicorn.Config(guarded(mcp.streamable_http_app()), log_level="warning",
                            access_log=False, timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM while serving, then re-raises it; this handler makes that (and
    # a SIGTERM before startup) a clean stop with exit status 0.
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [SOCK])
        while not server.started and not server.should_exit:
            await anyio.sleep(0.02)
        if server.started:
            print(f"LISTENING {RESOURCE}", flush=True)


if __name__ == "__main__":
    anyio.run(main)
    sys.exit(0)
