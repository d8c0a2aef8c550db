// ID tokens verified against a local JWKS server (as with Firebase or any OIDC provider): every forgery answers 401.
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as jose from 'jose';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';

const ISSUER = 'https://idp.test/project';
const AUDIENCE = 'wearable-app';

t.test('remote JWKS verification', async (t) => {
  const { privateKey, publicKey } = await jose.generateKeyPair('RS256');
  const { privateKey: strangerKey } = await jose.generateKeyPair('RS256');
  const jwk = { ...(await jose.exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  let jwksHits = 0;
  const idp = http.createServer((_req, res) => {
    jwksHits++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((r) => idp.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => idp.close(() => r())));
  const jwksUrl = `http://127.0.0.1:${(idp.address() as AddressInfo).port}/jwks.json`;

  const s = await startService(t, { env: { ID_TOKEN_JWKS_URL: jwksUrl, ID_TOKEN_ISSUER: ISSUER, ID_TOKEN_AUDIENCE: AUDIENCE } });
  const nowS = Math.floor(s.clock.now() / 1000);
  const sign = (claims: jose.JWTPayload, key: jose.CryptoKey = privateKey, kid = 'k1') =>
    new jose.SignJWT({ ...claims }).setProtectedHeader({ alg: 'RS256', kid }).sign(key);
  const good = { sub: 'user-1', iss: ISSUER, aud: AUDIENCE, iat: nowS, exp: nowS + 3600 };

  const ok = await s.req('/v1/dev/keys', { headers: bearer(await sign(good)) });
  t.equal(ok.status, 200, 'a valid token is accepted');
  t.same(ok.json, []);
  t.ok(jwksHits >= 1, 'keys came from the JWKS endpoint');

  const unsigned = new jose.UnsecuredJWT({ ...good }).setSubject('user-1').encode();
  const header = Buffer.from(JSON.stringify({ alg: 'RS256', kid: 'k1' })).toString('base64url');
  const payload = Buffer.from(JSON.stringify({ ...good, sub: 'victim' })).toString('base64url');
  const validToken = await sign(good);
  const tampered = `${header}.${payload}.${validToken.split('.')[2]}`;

  const cases: [string, string][] = [
    ['expired', await sign({ ...good, iat: nowS - 7200, exp: nowS - 3600 })],
    ['not yet valid', await sign({ ...good, nbf: nowS + 600 })],
    ['wrong issuer', await sign({ ...good, iss: 'https://evil.test' })],
    ['wrong audience', await sign({ ...good, aud: 'another-app' })],
    ['bad signature (another key)', await sign(good, strangerKey)],
    ['tampered payload', tampered],
    ['alg none', unsigned],
    ['no subject', await sign({ iss: ISSUER, aud: AUDIENCE, iat: nowS, exp: nowS + 3600 })],
    ['no expiry', await sign({ sub: 'user-1', iss: ISSUER, aud: AUDIENCE, iat: nowS })],
    ['not a JWT', 'abc.def'],
  ];
  for (const [name, token] of cases) {
    const res = await s.req('/v1/dev/keys', { headers: bearer(token) });
    t.equal(res.status, 401, name);
    t.equal(res.headers['x-error-code'], 'ENG_ERR_AUTH_TOKEN_INVALID', name);
    t.same(res.json, { detail: 'Invalid or expired token' }, name);
  }
});

t.test('local issuer: tokens from npm run token verify; tokens from another data dir do not', async (t) => {
  const dir = t.testdir();
  const a = await startService(t, { env: { DATA_DIR: `${dir}/a` } });
  const b = await startService(t, { env: { DATA_DIR: `${dir}/b` } });
  const fromA = await a.token('u1');
  t.equal((await a.req('/v1/dev/keys', { headers: bearer(fromA) })).status, 200);
  t.equal((await b.req('/v1/dev/keys', { headers: bearer(fromA) })).status, 401, 'each deployment has its own signing key');
});
