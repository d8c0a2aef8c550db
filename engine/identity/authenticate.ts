// The bearer check every HTTP route goes through: the credential its route needs, then the developer rate limits.
import type { Authenticator, Principal } from './authenticator.js';
import type { RateLimiter } from './rate-limit.js';
import type { Scope } from '../protocol.js';
import { EngineError, isEngineError } from '../errors.js';

/** What a route needs from the caller; the app's authenticate hook interprets it. */
export type AuthSpec =
  | { readonly kind: 'none' }
  /** `ofDeletedAccount`: a token issued before its account was deleted is taken too (to finish the deletion). */
  | { readonly kind: 'id_token'; readonly ofDeletedAccount?: boolean }
  | { readonly kind: 'api_key'; readonly scope: string; readonly alsoIdToken?: boolean }
  /** An assistant-protocol (svc_mcp_) key; each MCP tool checks its own scope. */
  | { readonly kind: 'mcp_key' };

export interface AuthResult<P> {
  principal: P;
  /** Headers added to the answer whatever it is (rate-limit headers, for example). */
  headers?: Record<string, string>;
  /** Whose data the request reads and its version token; absent when unknown or while a write of it is in flight. */
  dataVersion?: { readonly owner: string; readonly token: string };
}

const ANONYMOUS: Principal = { uid: '', via: 'none' };

/** The developer API's rate limits cover every authenticated route under this prefix. */
const RATE_LIMITED_PREFIX = '/v1/dev/';

/**
 * The rate-limit subject of a caller whose credentials failed: its address, so refusals carry the same headers as
 * every other developer answer and guessing keys from one address is bounded by the same windows.
 */
const anonymous = (address: string): string => `@addr:${address}`;

/** `err` answered with the rate-limit headers added. */
function withHeaders(err: EngineError, headers: Record<string, string>): EngineError {
  return new EngineError(err.code, {}, { detail: err.detail, headers: { ...err.headers, ...headers }, cause: err });
}

/**
 * Checks a request's credentials against what its route needs, then the developer API's rate limits. Under the
 * rate-limited prefix every answer carries the X-RateLimit-* headers: a missing scope counts against the key, and
 * a refused credential against the caller's address (`remoteAddress`).
 */
export async function authenticate(
  a: Authenticator,
  limiter: RateLimiter,
  spec: AuthSpec,
  headers: Readonly<Record<string, string>>,
  path: string,
  remoteAddress = '',
): Promise<AuthResult<Principal>> {
  const limited = spec.kind !== 'none' && path.startsWith(RATE_LIMITED_PREFIX);
  let principal: Principal;
  try {
    switch (spec.kind) {
      case 'none':
        return { principal: ANONYMOUS };
      case 'id_token':
        principal = await a.idToken(headers.authorization, spec.ofDeletedAccount);
        break;
      case 'api_key':
        // Under the limits, the scope is checked after counting, so its 403 carries the key's headers.
        principal = await a.apiKey(headers.authorization, 'dev', limited ? undefined : (spec.scope as Scope), spec.alsoIdToken);
        break;
      case 'mcp_key':
        principal = await a.apiKey(headers.authorization, 'mcp', undefined);
        break;
    }
  } catch (err) {
    if (!limited || !isEngineError(err) || err.status !== 401) throw err;
    const subject = anonymous(remoteAddress);
    let counted;
    try {
      counted = await limiter.hit(subject, subject);
    } catch (limit) {
      // Over the limit: the 429 says so. Without Redis the refusal stands as it is, without headers.
      if (isEngineError(limit) && limit.status === 429) throw limit;
      throw err;
    }
    throw withHeaders(err, counted.headers);
  }
  if (!limited) return { principal };
  // Per key per minute; a signed-in user without a key counts as one subject of their own. The same round trip
  // reads the user's data version, which lets the guard and cacheable routes reuse what they computed before.
  const counted = await limiter.hit(principal.keyId ?? `user:${principal.uid}`, principal.uid);
  if (spec.kind === 'api_key' && principal.via === 'api_key' && !principal.scopes?.includes(spec.scope as Scope)) {
    throw new EngineError('ENG_ERR_AUTH_SCOPE_MISSING', { scope: spec.scope }, { headers: counted.headers });
  }
  const dataVersion = counted.dataVersion;
  return { principal, headers: counted.headers, ...(dataVersion === undefined ? {} : { dataVersion: { owner: principal.uid, token: dataVersion } }) };
}
