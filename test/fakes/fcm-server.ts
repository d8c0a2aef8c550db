// A faithful FCM HTTP v1 fake with its OAuth token endpoint, on 127.0.0.1 port 0. The token endpoint takes only a
// jwt-bearer grant whose RS256 assertion verifies with the service account's public key, names the account as issuer,
// this endpoint as audience and the firebase.messaging scope. messages:send takes only the access tokens it issued,
// and answers like FCM: `{name}` on success, UNREGISTERED (404) for a token the test retired, INVALID_ARGUMENT (400)
// for a malformed token or payload, and the 429 / 5xx answers a test scripts for a token.
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { decodeJwt, jwtVerify } from 'jose';

export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
const FCM_ERROR_TYPE = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
/** What FCM device tokens look like (the fake refuses anything else as INVALID_ARGUMENT). */
const TOKEN_FORM = /^[A-Za-z0-9_:-]{20,4096}$/;

export interface TestServiceAccount {
  file: string;
  projectId: string;
  clientEmail: string;
  publicKey: KeyObject;
}

/** Writes a service-account JSON with a fresh RSA key into a new temporary directory (or `dir`). */
export function writeServiceAccount(dir = mkdtempSync(path.join(os.tmpdir(), 'fcm-sa-')), projectId = 'demo-project'): TestServiceAccount {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const clientEmail = `push@${projectId}.iam.gserviceaccount.com`;
  const file = path.join(dir, 'service-account.json');
  writeFileSync(file, JSON.stringify({
    type: 'service_account',
    project_id: projectId,
    private_key_id: randomBytes(20).toString('hex'),
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
    client_email: clientEmail,
    client_id: '100000000000000000000',
    token_uri: 'https://oauth2.googleapis.com/token',
  }));
  return { file, projectId, clientEmail, publicKey };
}

export interface SentMessage {
  token: string;
  title: string;
  body: string;
  data: Record<string, string>;
}

export interface FakeFcm {
  readonly url: string;
  readonly tokenUrl: string;
  /** Successful sends, in order. */
  readonly sent: SentMessage[];
  /** Every send asked for (token and answered status), in order. */
  readonly attempts: { token: string; status: number }[];
  /** Assertions exchanged for an access token. */
  exchanges: number;
  /** Assertions refused, with the reason. */
  readonly refused: string[];
  /** Device tokens FCM no longer knows (answered UNREGISTERED). */
  readonly unregistered: Set<string>;
  /** Statuses answered to a token's next sends before it succeeds (429 carries Retry-After: 1). */
  failNext(token: string, statuses: number[]): void;
  /** Forgets every access token issued, as if they expired early. */
  revokeAccessTokens(): void;
  close(): Promise<void>;
}

function fcmError(res: http.ServerResponse, status: number, statusName: string, message: string, errorCode?: string, headers: Record<string, string> = {}): void {
  const details = errorCode ? [{ '@type': FCM_ERROR_TYPE, errorCode }] : [];
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', ...headers });
  res.end(JSON.stringify({ error: { code: status, message, status: statusName, details } }));
}

const STATUS_NAMES: Record<number, string> = { 429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 502: 'UNAVAILABLE', 503: 'UNAVAILABLE' };

export async function startFakeFcm(account: TestServiceAccount): Promise<FakeFcm> {
  const issued = new Set<string>();
  const scripted = new Map<string, number[]>();
  let base = '';
  const fake: FakeFcm = {
    url: '',
    tokenUrl: '',
    sent: [],
    attempts: [],
    exchanges: 0,
    refused: [],
    unregistered: new Set(),
    failNext: (token, statuses) => scripted.set(token, [...(scripted.get(token) ?? []), ...statuses]),
    revokeAccessTokens: () => issued.clear(),
    close: async () => undefined,
  };

  async function token(body: string, res: http.ServerResponse): Promise<void> {
    const form = new URLSearchParams(body);
    const refuse = (why: string): void => {
      fake.refused.push(why);
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'invalid_grant', error_description: why }));
    };
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return refuse('unsupported grant_type');
    const assertion = form.get('assertion') ?? '';
    let iat: number;
    try {
      iat = Number(decodeJwt(assertion).iat);
    } catch {
      return refuse('assertion is not a JWT');
    }
    try {
      // Times are checked against the assertion's own iat: the service's clock is the test's to move.
      const { payload, protectedHeader } = await jwtVerify(assertion, account.publicKey, {
        algorithms: ['RS256'],
        issuer: account.clientEmail,
        audience: fake.tokenUrl,
        currentDate: new Date(iat * 1000),
        requiredClaims: ['iat', 'exp', 'scope'],
      });
      if (protectedHeader.typ !== undefined && protectedHeader.typ !== 'JWT') return refuse('typ must be JWT');
      if (Number(payload.exp) - iat > 3600 || Number(payload.exp) <= iat) return refuse('exp must be within an hour of iat');
      if (!String(payload.scope).split(' ').includes(FCM_SCOPE)) return refuse('scope lacks firebase.messaging');
    } catch (err) {
      return refuse(`assertion refused: ${(err as Error).message}`);
    }
    fake.exchanges++;
    const access = `ya29.${randomBytes(24).toString('base64url')}`;
    issued.add(access);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ access_token: access, expires_in: 3599, token_type: 'Bearer' }));
  }

  function send(project: string, auth: string | undefined, body: string, res: http.ServerResponse): void {
    let message: { token?: unknown; notification?: { title?: unknown; body?: unknown }; data?: Record<string, unknown> };
    try {
      message = (JSON.parse(body) as { message: typeof message }).message;
    } catch {
      return fcmError(res, 400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.');
    }
    const token = typeof message?.token === 'string' ? message.token : '';
    const record = (status: number): void => void fake.attempts.push({ token, status });
    const access = /^Bearer (.+)$/.exec(auth ?? '')?.[1];
    if (!access || !issued.has(access)) {
      record(401);
      return fcmError(res, 401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.');
    }
    if (project !== account.projectId) {
      record(403);
      return fcmError(res, 403, 'PERMISSION_DENIED', 'Permission denied on the project.', 'SENDER_ID_MISMATCH');
    }
    if (message.data !== undefined && Object.values(message.data).some((v) => typeof v !== 'string')) {
      record(400);
      return fcmError(res, 400, 'INVALID_ARGUMENT', 'Invalid value at message.data: values must be strings', 'INVALID_ARGUMENT');
    }
    if (!TOKEN_FORM.test(token)) {
      record(400);
      return fcmError(res, 400, 'INVALID_ARGUMENT', 'The registration token is not a valid FCM registration token', 'INVALID_ARGUMENT');
    }
    const next = scripted.get(token)?.shift();
    if (next !== undefined) {
      record(next);
      return fcmError(res, next, STATUS_NAMES[next] ?? 'INTERNAL', 'Scripted failure.', next === 429 ? 'QUOTA_EXCEEDED' : 'UNAVAILABLE', next === 429 ? { 'retry-after': '1' } : {});
    }
    if (fake.unregistered.has(token)) {
      record(404);
      return fcmError(res, 404, 'NOT_FOUND', 'Requested entity was not found.', 'UNREGISTERED');
    }
    record(200);
    fake.sent.push({ token, title: String(message.notification?.title ?? ''), body: String(message.notification?.body ?? ''), data: (message.data ?? {}) as Record<string, string> });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ name: `projects/${project}/messages/${randomBytes(8).toString('hex')}` }));
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const url = new URL(req.url ?? '/', base);
      const m = /^\/v1\/projects\/([^/]+)\/messages:send$/.exec(url.pathname);
      if (req.method === 'POST' && url.pathname === '/token') void token(body, res);
      else if (req.method === 'POST' && m) send(decodeURIComponent(m[1]!), req.headers.authorization, body, res);
      else fcmError(res, 404, 'NOT_FOUND', 'Not found.');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  Object.assign(fake, {
    url: base,
    tokenUrl: `${base}/token`,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  });
  return fake;
}
