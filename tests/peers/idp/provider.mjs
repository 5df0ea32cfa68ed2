// Test peer for airlock's `[serve.auth]` identity-provider tests: a real
// OpenID Connect / OAuth 2 authorization server (npm `oidc-provider`) served
// on 127.0.0.1 only.
//
// Usage: node tests/peers/idp/provider.mjs CONFIG.json
//
// CONFIG.json:
//   {
//     "port": 0,                        // 0 = pick a free port
//     "key": { ...private RSA JWK with "kid" (mint.mjs keygen) },
//     "clients": [ { "client_id": "alice-app", "client_secret": "s3cret",
//                    "groups": ["eng"], "scope": "mcp:tools" },
//                  { "client_id": "gateway-app", "client_secret": "gw",
//                    "scope": "mcp:tools", "token_exchange": true } ],
//     "resources": ["http://127.0.0.1:5555/mcp"],
//     "opaque_resources": ["http://127.0.0.1:5556/mcp"],  // optional, default []
//     "resource_scopes": "mcp:tools",   // optional, default "mcp:tools"
//     "access_token_ttl": 300,          // optional, seconds, default 300
//     "exchange_audiences": ["http://127.0.0.1:9999/mcp"]  // optional, default []
//   }
//
// `resources` get RS256 JWT access tokens; `opaque_resources` get opaque (random string)
// access tokens, with the same audience (the resource URL), scopes and groups, which a
// resource server must check at the introspection endpoint (RFC 7662),
// POST /token/introspection (client_secret_basic or client_secret_post). A client with
// "introspection": true may introspect any token; other clients keep oidc-provider's
// default policy. An active opaque token's answer has active, sub (the client_id),
// aud, scope, exp, iat, client_id, iss, token_type and groups (no jti: it is the token
// itself); an expired, unknown or garbage token gives {"active": false}. JWTs cannot be
// introspected (error unsupported_token_type).
//
// When listening it prints exactly one stdout line, {"issuer":"http://127.0.0.1:PORT"},
// and nothing else goes to stdout (oidc-provider notices are sent to stderr).
//
// Token exchange (RFC 8693): clients with "token_exchange": true may POST /token with
// grant_type=urn:ietf:params:oauth:grant-type:token-exchange, subject_token (a JWT this
// provider issued for one of `resources`), subject_token_type (…:token-type:access_token
// or …:token-type:jwt), audience and/or resource (one target, in `exchange_audiences`)
// and an optional scope. The answer is an RS256 "at+jwt" access token for that audience
// with the subject's sub (and groups) and act = {"sub": <exchanging client_id>}.
// Errors: unauthorized_client (client not allowed), invalid_target (audience),
// invalid_grant (subject token), invalid_request (missing/unsupported parameters).
// GET /test/exchanges answers {"count": N}, the number of successful exchanges so far.
// It exits on SIGTERM/SIGINT/SIGHUP, when stdin (if it is a pipe or socket) reaches
// EOF, and when its parent process goes away.

import fs from 'node:fs';
import http from 'node:http';

// oidc-provider prints notices with console.info (stdout); keep stdout for the
// single issuer line only.
console.info = (...args) => console.error(...args);
console.log = (...args) => console.error(...args);

const { default: Provider, errors } = await import('oidc-provider');
const jose = await import('jose');

function fail(msg) {
  process.stderr.write(`idp/provider.mjs: ${msg}\n`);
  process.exit(2);
}

const configPath = process.argv[2];
if (!configPath) fail('usage: node provider.mjs CONFIG.json');

let config;
try {
  config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
} catch (err) {
  fail(`cannot read config ${configPath}: ${err.message}`);
}

const port = Number(config.port ?? 0);
const key = config.key;
if (!key || typeof key !== 'object' || key.kty !== 'RSA' || !key.d || !key.kid) {
  fail('config.key must be a private RSA JWK with a kid');
}
const clients = Array.isArray(config.clients) ? config.clients : [];
const resources = Array.isArray(config.resources) ? config.resources.map(String) : [];
const opaqueResources = Array.isArray(config.opaque_resources)
  ? config.opaque_resources.map(String) : [];
const resourceScopes = String(config.resource_scopes ?? 'mcp:tools').split(' ').filter(Boolean).join(' ');
const accessTokenTTL = Number(config.access_token_ttl ?? 300);
if (!Number.isSafeInteger(accessTokenTTL) || accessTokenTTL <= 0) {
  fail('config.access_token_ttl must be a positive integer');
}

const exchangeAudiences = Array.isArray(config.exchange_audiences)
  ? config.exchange_audiences.map(String) : [];

const introspectors = new Set(
  clients.filter((c) => c.introspection === true).map((c) => String(c.client_id)),
);

const groupsByClient = new Map(
  clients.map((c) => [String(c.client_id), Array.isArray(c.groups) ? c.groups.map(String) : []]),
);

// Every scope a client or resource may mention must be a known ("static") scope;
// that also makes oidc-provider enforce each client's `scope` allow-list.
const scopes = new Set(['openid', 'offline_access']);
for (const s of resourceScopes.split(' ')) scopes.add(s);
for (const c of clients) {
  for (const s of String(c.scope ?? '').split(' ').filter(Boolean)) scopes.add(s);
}

function normalize(url) {
  return URL.parse(url)?.href ?? url;
}

function matchResource(indicator) {
  return resources.find((r) => r === indicator || normalize(r) === normalize(indicator));
}

function matchOpaqueResource(indicator) {
  return opaqueResources.find((r) => r === indicator || normalize(r) === normalize(indicator));
}

function matchExchangeAudience(target) {
  return exchangeAudiences.find((a) => a === target || normalize(a) === normalize(target));
}

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const TT_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const TT_JWT = 'urn:ietf:params:oauth:token-type:jwt';

const signingKey = await jose.importJWK({ ...key, alg: 'RS256' }, 'RS256');
const { d, p, q, dp, dq, qi, oth, ...publicJwk } = key;
const verifyingKey = await jose.importJWK({ ...publicJwk, alg: 'RS256' }, 'RS256');
let exchanges = 0;

// Listen first so that port 0 resolves to a real port, then build the
// provider with the exact issuer and attach it as the request handler.
let handler = (req, res) => {
  res.statusCode = 503;
  res.end();
};
const server = http.createServer((req, res) => handler(req, res));

await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
server.on('error', (err) => process.stderr.write(`idp/provider.mjs: server error: ${err.message}\n`));

const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: clients.map((c) => ({
    client_id: String(c.client_id),
    client_secret: String(c.client_secret),
    grant_types: ['client_credentials', ...(c.token_exchange === true ? [TOKEN_EXCHANGE] : [])],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic', // client_secret_post is accepted too
    ...(c.scope ? { scope: String(c.scope).split(' ').filter(Boolean).join(' ') } : {}),
  })),
  jwks: { keys: [{ alg: 'RS256', use: 'sig', ...key }] },
  cookies: { keys: ['airlock-idp-test-cookie-key-1', 'airlock-idp-test-cookie-key-2'] },
  scopes: [...scopes],
  clientBasedCORS: () => true,
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: {
      enabled: true,
      // Clients with "introspection": true may introspect any token; others get
      // oidc-provider's default policy (a public client only its own tokens).
      allowedPolicy: (ctx, client, token) => {
        if (introspectors.has(client.clientId)) return true;
        return !(client.clientAuthMethod === 'none' && token.clientId !== client.clientId);
      },
    },
    revocation: { enabled: true },
    registration: { enabled: true, initialAccessToken: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resourceIndicator) => {
        const resource = matchResource(resourceIndicator);
        if (!resource) {
          const opaque = matchOpaqueResource(resourceIndicator);
          if (!opaque) throw new errors.InvalidTarget();
          return {
            scope: resourceScopes,
            audience: opaque,
            accessTokenTTL,
            accessTokenFormat: 'opaque',
          };
        }
        return {
          scope: resourceScopes,
          audience: resource,
          accessTokenTTL,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  extraTokenClaims: (ctx, token) => {
    const groups = groupsByClient.get(token.clientId);
    return groups ? { groups } : undefined;
  },
  ttl: {
    AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL || accessTokenTTL,
    ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL || accessTokenTTL,
  },
  renderError: (ctx, out) => {
    ctx.type = 'json';
    ctx.body = out;
  },
});

// RFC 8414 metadata: same document as OpenID discovery.
provider.use(async (ctx, next) => {
  if (ctx.path === '/.well-known/oauth-authorization-server') {
    ctx.path = '/.well-known/openid-configuration';
  }
  await next();
});

// Introspection answers for client_credentials tokens carry no sub (they have no
// account); give them the client_id, as the JWT access tokens have.
provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/token/introspection' && ctx.body?.active === true
      && ctx.body.sub === undefined && typeof ctx.body.client_id === 'string') {
    ctx.body.sub = ctx.body.client_id;
  }
});

// How many token exchanges have succeeded (lets a test prove a caller caches).
provider.use(async (ctx, next) => {
  if (ctx.method === 'GET' && ctx.path === '/test/exchanges') {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { count: exchanges };
    return;
  }
  await next();
});

function withDescription(err, description) {
  err.error_description = description;
  return err;
}

// oidc-provider answers invalid_request to a grant type missing from the client's
// grant_types; let the token-exchange grant through to its handler, which answers
// unauthorized_client (RFC 6749 section 5.2) for clients without it.
const grantTypeAllowed = provider.Client.prototype.grantTypeAllowed;
provider.Client.prototype.grantTypeAllowed = function allowed(type) {
  return type === TOKEN_EXCHANGE || grantTypeAllowed.call(this, type);
};

async function tokenExchange(ctx) {
  const { client, params } = ctx.oidc;
  if (!client.grantTypes.includes(TOKEN_EXCHANGE)) {
    throw new errors.UnauthorizedClient('this client may not use token exchange');
  }
  if (params.actor_token !== undefined || params.actor_token_type !== undefined) {
    throw new errors.InvalidRequest('actor_token is not supported');
  }
  if (params.requested_token_type !== undefined && params.requested_token_type !== TT_ACCESS_TOKEN) {
    throw new errors.InvalidRequest('requested_token_type must be urn:ietf:params:oauth:token-type:access_token');
  }
  if (typeof params.subject_token !== 'string' || !params.subject_token) {
    throw new errors.InvalidRequest('missing required parameter subject_token');
  }
  if (params.subject_token_type !== TT_ACCESS_TOKEN && params.subject_token_type !== TT_JWT) {
    throw new errors.InvalidRequest(
      'subject_token_type must be urn:ietf:params:oauth:token-type:access_token or urn:ietf:params:oauth:token-type:jwt',
    );
  }

  const asList = (v) => (v === undefined ? [] : [v].flat().map(String));
  const targets = [...new Set([...asList(params.audience), ...asList(params.resource)].map(normalize))];
  if (targets.length === 0) throw new errors.InvalidTarget('audience or resource is required');
  if (targets.length > 1) throw new errors.InvalidTarget('only one target audience is supported');
  const audience = matchExchangeAudience(targets[0]);
  if (!audience) throw new errors.InvalidTarget('the requested audience is not allowed');

  let subject;
  try {
    ({ payload: subject } = await jose.jwtVerify(params.subject_token, verifyingKey, {
      issuer,
      algorithms: ['RS256'],
      requiredClaims: ['exp', 'sub'],
    }));
  } catch (err) {
    throw withDescription(new errors.InvalidGrant(), `subject_token is invalid: ${err.message}`);
  }
  const subjectAud = [subject.aud ?? []].flat().map(String);
  if (!subjectAud.some((a) => matchResource(a))) {
    throw withDescription(new errors.InvalidGrant(), 'subject_token was not issued for a known resource');
  }

  const scope = (params.scope || subject.scope || '').split(' ').filter(Boolean).join(' ');
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    sub: subject.sub,
    ...(scope ? { scope } : {}),
    act: { sub: client.clientId },
    ...(Array.isArray(subject.groups) ? { groups: subject.groups } : {}),
    client_id: client.clientId,
    jti: jose.base64url.encode(crypto.getRandomValues(new Uint8Array(24))),
  };
  const accessToken = await new jose.SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setAudience(audience)
    .setIssuedAt(now)
    .setExpirationTime(now + accessTokenTTL)
    .sign(signingKey);

  exchanges += 1;
  ctx.body = {
    access_token: accessToken,
    issued_token_type: TT_ACCESS_TOKEN,
    token_type: 'Bearer',
    expires_in: accessTokenTTL,
    ...(scope ? { scope } : {}),
  };
}

provider.registerGrantType(
  TOKEN_EXCHANGE,
  tokenExchange,
  ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type',
    'requested_token_type', 'audience', 'resource', 'scope'],
  ['audience', 'resource'],
);

handler = provider.callback();

process.stdout.write(`${JSON.stringify({ issuer })}\n`);

let stopping = false;
function shutdown(reason) {
  if (stopping) return;
  stopping = true;
  process.stderr.write(`idp/provider.mjs: exiting (${reason})\n`);
  server.close();
  server.closeAllConnections();
  // Give stdout/stderr a moment to drain, then go regardless.
  setTimeout(() => process.exit(0), 50).unref();
}

for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(sig, () => shutdown(sig));
}

// Exit when stdin closes, but only if stdin is a pipe/socket: a /dev/null or
// TTY stdin would otherwise end (or never end) immediately.
let stdinWatched = false;
try {
  const st = fs.fstatSync(0);
  stdinWatched = st.isFIFO() || st.isSocket();
} catch {
  stdinWatched = false;
}
if (stdinWatched) {
  process.stdin.on('end', () => shutdown('stdin closed'));
  process.stdin.on('close', () => shutdown('stdin closed'));
  process.stdin.on('error', () => shutdown('stdin error'));
  process.stdin.on('data', () => {});
  process.stdin.resume();
}

// Never outlive the parent (e.g. a test that panicked without killing us).
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) shutdown('parent exited');
}, 500).unref();
