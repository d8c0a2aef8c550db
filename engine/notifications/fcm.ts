// FCM HTTP v1: an OAuth access token from a signed service-account assertion (RFC 7523, RS256 with jose), kept until
// shortly before it expires, and one messages:send per device token.
import { importPKCS8, SignJWT } from 'jose';
import type { Clock } from '../clock.js';
import type { ServiceAccount } from './service-account.js';

/** The OAuth scope FCM HTTP v1 requires. */
export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
/** Google's token endpoint, when neither FCM_TOKEN_URL nor the account file names one. */
export const DEFAULT_TOKEN_URL = 'https://oauth2.googleapis.com/token';
/** Lifetime asked of an assertion (Google's maximum). */
const ASSERTION_TTL_S = 3600;
/** An access token is replaced this long before it expires, so no send goes out with one about to lapse. */
export const TOKEN_REFRESH_MARGIN_MS = 5 * 60_000;
/** One token exchange or one send, at most. */
export const FCM_REQUEST_TIMEOUT_MS = 10_000;

/** What a send came to, as the push job needs it. */
export type SendOutcome =
  | { kind: 'sent'; name: string }
  /** The token is no longer valid (UNREGISTERED, or refused as malformed): remove it. */
  | { kind: 'invalid_token'; code: string }
  /** Worth another try later (429, 5xx, a network failure); `retryAfterS` when the server said. */
  | { kind: 'retry'; status: number; retryAfterS?: number }
  /** Refused for a reason no retry fixes. */
  | { kind: 'failed'; status: number; code: string };

export interface PushMessage {
  title: string;
  body: string;
  data: Record<string, string>;
}

export interface FcmClientOptions {
  account: ServiceAccount;
  tokenUrl: string | undefined;
  baseUrl: string;
  clock: Clock;
}

export class FcmClient {
  readonly #o: FcmClientOptions;
  readonly #tokenUrl: string;
  #key: ReturnType<typeof importPKCS8> | undefined;
  #access: { token: string; expiresAt: number } | undefined;
  #fetching: Promise<string> | undefined;

  constructor(o: FcmClientOptions) {
    this.#o = o;
    this.#tokenUrl = o.tokenUrl ?? o.account.tokenUri ?? DEFAULT_TOKEN_URL;
  }

  /** A valid access token: the cached one, or one fetched now (concurrent callers share one fetch). */
  async accessToken(): Promise<string> {
    const now = this.#o.clock.now();
    if (this.#access && now < this.#access.expiresAt - TOKEN_REFRESH_MARGIN_MS) return this.#access.token;
    this.#fetching ??= this.#fetchToken().finally(() => (this.#fetching = undefined));
    return this.#fetching;
  }

  async #fetchToken(): Promise<string> {
    const { account, clock } = this.#o;
    this.#key ??= importPKCS8(account.privateKey, 'RS256');
    const iat = Math.floor(clock.now() / 1000);
    const assertion = await new SignJWT({ scope: FCM_SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT' })
      .setIssuer(account.clientEmail)
      .setSubject(account.clientEmail)
      .setAudience(this.#tokenUrl)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ASSERTION_TTL_S)
      .sign(await this.#key);
    const res = await fetch(this.#tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion }).toString(),
      signal: AbortSignal.timeout(FCM_REQUEST_TIMEOUT_MS),
    });
    const json = (await res.json().catch(() => ({}))) as { access_token?: unknown; expires_in?: unknown };
    if (!res.ok || typeof json.access_token !== 'string') throw new TokenExchangeFailed(res.status);
    const ttlS = typeof json.expires_in === 'number' && json.expires_in > 0 ? json.expires_in : ASSERTION_TTL_S;
    this.#access = { token: json.access_token, expiresAt: clock.now() + ttlS * 1000 };
    return json.access_token;
  }

  /** Sends one message to one device token. */
  async send(deviceToken: string, m: PushMessage): Promise<SendOutcome> {
    let access: string;
    try {
      access = await this.accessToken();
    } catch (err) {
      const status = err instanceof TokenExchangeFailed ? err.status : 0;
      // A refused assertion (bad key, wrong account) will not pass on retry; an unreachable endpoint may.
      return status >= 400 && status < 500 && status !== 429 ? { kind: 'failed', status, code: 'TOKEN_EXCHANGE_REFUSED' } : { kind: 'retry', status };
    }
    let res: Response;
    try {
      res = await fetch(`${this.#o.baseUrl}/v1/projects/${encodeURIComponent(this.#o.account.projectId)}/messages:send`, {
        method: 'POST',
        headers: { authorization: `Bearer ${access}`, 'content-type': 'application/json' },
        body: JSON.stringify({ message: { token: deviceToken, notification: { title: m.title, body: m.body }, data: m.data } }),
        signal: AbortSignal.timeout(FCM_REQUEST_TIMEOUT_MS),
      });
    } catch {
      return { kind: 'retry', status: 0 };
    }
    const json = (await res.json().catch(() => ({}))) as { name?: unknown; error?: { status?: string; details?: { '@type'?: string; errorCode?: string }[] } };
    if (res.ok) return { kind: 'sent', name: typeof json.name === 'string' ? json.name : '' };
    const code = json.error?.details?.find((d) => d['@type']?.endsWith('google.firebase.fcm.v1.FcmError'))?.errorCode ?? json.error?.status ?? `HTTP_${res.status}`;
    if (res.status === 401) {
      // The access token was revoked or expired early: the next try fetches another.
      this.#access = undefined;
      return { kind: 'retry', status: 401 };
    }
    if (res.status === 429 || res.status >= 500) {
      const after = Number(res.headers.get('retry-after'));
      return { kind: 'retry', status: res.status, ...(Number.isFinite(after) && after > 0 ? { retryAfterS: after } : {}) };
    }
    if (code === 'UNREGISTERED' || code === 'INVALID_ARGUMENT' || code === 'SENDER_ID_MISMATCH') return { kind: 'invalid_token', code };
    return { kind: 'failed', status: res.status, code };
  }
}

class TokenExchangeFailed extends Error {
  constructor(readonly status: number) {
    super(`token exchange failed with HTTP ${status}`);
    this.name = 'TokenExchangeFailed';
  }
}
