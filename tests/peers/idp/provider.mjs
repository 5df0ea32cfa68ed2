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
//                    "groups": ["eng"], "scope": "mcp:tools" } ],
//     "resources": ["http://127.0.0.1:5555/mcp"],
//     "resource_scopes": "mcp:tools",   // optional, default "mcp:tools"
//     "access_token_ttl": 300           // optional, seconds, default 300
//   }
//
// When listening it prints exactly one stdout line, {"issuer":"http://127.0.0.1:PORT"},
// and nothing else goes to stdout (oidc-provider notices are sent to stderr).
// It exits on SIGTERM/SIGINT/SIGHUP, when stdin (if it is a pipe or socket) reaches
// EOF, and when its parent process goes away.

import fs from 'node:fs';
import http from 'node:http';

// oidc-provider prints notices with console.info (stdout); keep stdout for the
// single issuer line only.
console.info = (...args) => console.error(...args);
console.log = (...args) => console.error(...args);

const { default: Provider, errors } = await import('oidc-provider');

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
const resourceScopes = String(config.resource_scopes ?? 'mcp:tools').split(' ').filter(Boolean).join(' ');
const accessTokenTTL = Number(config.access_token_ttl ?? 300);
if (!Number.isSafeInteger(accessTokenTTL) || accessTokenTTL <= 0) {
  fail('config.access_token_ttl must be a positive integer');
}

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
    grant_types: ['client_credentials'],
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
    introspection: { enabled: true },
    revocation: { enabled: true },
    registration: { enabled: true, initialAccessToken: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resourceIndicator) => {
        const resource = matchResource(resourceIndicator);
        if (!resource) throw new errors.InvalidTarget();
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
