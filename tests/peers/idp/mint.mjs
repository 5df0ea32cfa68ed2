// Test peer for airlock's `[serve.auth]` identity-provider tests: key and
// token minting with `jose`, for tokens the real provider (provider.mjs) would
// never issue (expired, wrong audience, no scope, unknown signing key, ...).
//
// Usage:
//   node tests/peers/idp/mint.mjs keygen KID
//       prints a new private RSA JWK (2048-bit, alg RS256, use sig, kid KID)
//       as one JSON line.
//   node tests/peers/idp/mint.mjs sign KEY.json CLAIMS.json
//       prints a compact JWS (RS256, header {alg, kid from the key, typ "at+jwt"})
//       over the claims object in CLAIMS.json, used exactly as given.

import fs from 'node:fs';
import { CompactSign, exportJWK, generateKeyPair, importJWK } from 'jose';

function fail(msg) {
  process.stderr.write(`idp/mint.mjs: ${msg}\n`);
  process.exit(2);
}

function readJson(path, what) {
  try {
    return JSON.parse(fs.readFileSync(path, 'utf8'));
  } catch (err) {
    return fail(`cannot read ${what} ${path}: ${err.message}`);
  }
}

const [cmd, ...args] = process.argv.slice(2);

if (cmd === 'keygen' && args.length === 1) {
  const [kid] = args;
  const { privateKey } = await generateKeyPair('RS256', { modulusLength: 2048, extractable: true });
  const jwk = await exportJWK(privateKey);
  process.stdout.write(`${JSON.stringify({ ...jwk, kid, alg: 'RS256', use: 'sig' })}\n`);
} else if (cmd === 'sign' && args.length === 2) {
  const jwk = readJson(args[0], 'key');
  const claims = readJson(args[1], 'claims');
  if (!jwk || jwk.kty !== 'RSA' || !jwk.d) fail('KEY.json must be a private RSA JWK');
  if (!claims || typeof claims !== 'object' || Array.isArray(claims)) fail('CLAIMS.json must be a JSON object');
  const key = await importJWK(jwk, 'RS256');
  const header = { alg: 'RS256', typ: 'at+jwt', ...(jwk.kid !== undefined ? { kid: jwk.kid } : {}) };
  const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
    .setProtectedHeader(header)
    .sign(key);
  process.stdout.write(`${jws}\n`);
} else {
  fail('usage: mint.mjs keygen KID | mint.mjs sign KEY.json CLAIMS.json');
}
