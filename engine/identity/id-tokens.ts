// ID-token verification: a remote JWKS (Firebase or any OIDC provider) in production, a local issuer whose key lives in DATA_DIR by default.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import * as jose from 'jose';
import type { Clock } from '../clock.js';
import { EngineError } from '../errors.js';

/** What a verified ID token vouches for. */
export interface VerifiedIdToken {
  /** The token's subject: the user id. */
  readonly uid: string;
  /** The token's `exp`, in epoch milliseconds. */
  readonly expiresAtMs: number;
  /** The token's `iat`, in epoch milliseconds; 0 when it has none. */
  readonly issuedAtMs: number;
}

export interface IdTokenVerifier {
  /** Resolves to the token's subject and expiry; throws ENG_ERR_AUTH_TOKEN_INVALID for any bad token. */
  verify(token: string): Promise<VerifiedIdToken>;
}

/** Algorithms accepted from a remote identity provider; `none` and HMAC are never accepted. */
const REMOTE_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'PS256', 'EdDSA'];
const MAX_UID_LENGTH = 128;

interface VerifyOptions {
  issuer: string;
  audience: string;
  clockToleranceS: number;
  clock: Clock;
}

async function verifyWith(
  token: string,
  key: jose.CryptoKey | jose.KeyObject | jose.JWTVerifyGetKey,
  algorithms: string[],
  opts: VerifyOptions,
): Promise<VerifiedIdToken> {
  let payload: jose.JWTPayload;
  try {
    ({ payload } = await jose.jwtVerify(token, key as jose.JWTVerifyGetKey, {
      issuer: opts.issuer,
      audience: opts.audience,
      algorithms,
      clockTolerance: opts.clockToleranceS,
      currentDate: new Date(opts.clock.now()),
      requiredClaims: ['sub', 'exp'],
    }));
  } catch (err) {
    throw new EngineError('ENG_ERR_AUTH_TOKEN_INVALID', {}, { cause: err, headers: { 'www-authenticate': 'Bearer error="invalid_token"' } });
  }
  const sub = payload.sub;
  if (typeof sub !== 'string' || sub.length === 0 || sub.length > MAX_UID_LENGTH) {
    throw new EngineError('ENG_ERR_AUTH_TOKEN_INVALID', {}, { headers: { 'www-authenticate': 'Bearer error="invalid_token"' } });
  }
  // requiredClaims made jose check that exp is there and a number; jose checks iat's type when it is there.
  return { uid: sub, expiresAtMs: (payload.exp as number) * 1000, issuedAtMs: typeof payload.iat === 'number' ? payload.iat * 1000 : 0 };
}

/** Verifies against a provider's JWKS endpoint; keys are fetched and cached by jose (refetched on unknown `kid`). */
export function remoteVerifier(jwksUrl: string, opts: VerifyOptions): IdTokenVerifier {
  const jwks = jose.createRemoteJWKSet(new URL(jwksUrl), { timeoutDuration: 5000, cooldownDuration: 30_000 });
  return { verify: (token) => verifyWith(token, jwks, REMOTE_ALGORITHMS, opts) };
}

interface StoredKey {
  kid: string;
  privateJwk: jose.JWK;
}

/**
 * The embedded identity provider: an ES256 key created once under DATA_DIR/identity, used to sign tokens
 * for `npm run token` and to verify them. Replace with ID_TOKEN_JWKS_URL in production.
 */
export class LocalIssuer implements IdTokenVerifier {
  private constructor(
    readonly kid: string,
    readonly privateKey: jose.CryptoKey,
    readonly publicKey: jose.CryptoKey,
    readonly publicJwk: jose.JWK,
    readonly opts: VerifyOptions,
  ) {}

  static async open(dataDir: string, opts: VerifyOptions): Promise<LocalIssuer> {
    const dir = path.join(dataDir, 'identity');
    const file = path.join(dir, 'local-issuer.jwk.json');
    let stored: StoredKey;
    if (fs.existsSync(file)) {
      stored = JSON.parse(fs.readFileSync(file, 'utf8')) as StoredKey;
    } else {
      const { privateKey } = await jose.generateKeyPair('ES256', { extractable: true });
      stored = { kid: randomUUID(), privateJwk: await jose.exportJWK(privateKey) };
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      // Write then rename, so a crash never leaves half a key; 0600 because it is a signing secret.
      const tmp = `${file}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, JSON.stringify(stored), { mode: 0o600 });
      try {
        fs.linkSync(tmp, file);
      } catch {
        // Another process created it first: use theirs.
      }
      fs.rmSync(tmp, { force: true });
      stored = JSON.parse(fs.readFileSync(file, 'utf8')) as StoredKey;
    }
    const privateKey = (await jose.importJWK(stored.privateJwk, 'ES256')) as jose.CryptoKey;
    const { d: _d, ...publicJwk } = stored.privateJwk;
    const publicKey = (await jose.importJWK(publicJwk, 'ES256')) as jose.CryptoKey;
    return new LocalIssuer(stored.kid, privateKey, publicKey, { ...publicJwk, kid: stored.kid, alg: 'ES256', use: 'sig' }, opts);
  }

  /** Signs an ID token for `uid` valid for `ttlS` seconds from the clock's now. */
  async sign(uid: string, ttlS: number): Promise<string> {
    const nowS = Math.floor(this.opts.clock.now() / 1000);
    return new jose.SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: this.kid, typ: 'JWT' })
      .setSubject(uid)
      .setIssuer(this.opts.issuer)
      .setAudience(this.opts.audience)
      .setIssuedAt(nowS)
      .setExpirationTime(nowS + ttlS)
      .sign(this.privateKey);
  }

  verify(token: string): Promise<VerifiedIdToken> {
    return verifyWith(token, this.publicKey, ['ES256'], this.opts);
  }
}
