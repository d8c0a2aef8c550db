// The bearer check every HTTP route goes through: the credential its route needs, then the developer rate limits.
import type { Authenticator, Principal } from './authenticator.js';
import type { RateLimiter } from './rate-limit.js';
import type { Scope } from '../protocol.js';

/** What a route needs from the caller; the app's authenticate hook interprets it. */
export type AuthSpec =
  | { readonly kind: 'none' }
  | { readonly kind: 'id_token' }
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

/** Checks a request's credentials against what its route needs, then the developer API's rate limits. */
export async function authenticate(
  a: Authenticator,
  limiter: RateLimiter,
  spec: AuthSpec,
  headers: Readonly<Record<string, string>>,
  path: string,
): Promise<AuthResult<Principal>> {
  let principal: Principal;
  switch (spec.kind) {
    case 'none':
      return { principal: ANONYMOUS };
    case 'id_token':
      principal = await a.idToken(headers.authorization);
      break;
    case 'api_key':
      principal = await a.apiKey(headers.authorization, 'dev', spec.scope as Scope, spec.alsoIdToken);
      break;
    case 'mcp_key':
      principal = await a.apiKey(headers.authorization, 'mcp', undefined);
      break;
  }
  if (!path.startsWith(RATE_LIMITED_PREFIX)) return { principal };
  // Per key per minute; a signed-in user without a key counts as one subject of their own. The same round trip
  // reads the user's data version, which lets the guard and cacheable routes reuse what they computed before.
  const limited = await limiter.hit(principal.keyId ?? `user:${principal.uid}`, principal.uid);
  const dataVersion = limited.dataVersion;
  return { principal, headers: limited.headers, ...(dataVersion === undefined ? {} : { dataVersion: { owner: principal.uid, token: dataVersion } }) };
}
