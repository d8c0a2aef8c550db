// Pieces of the isolation walk: a keep-alive client that answers bytes, two users' data of every kind the API has,
// and ID tokens that must fail (expired, another audience or issuer, another key, unsigned, malformed).
import http from 'node:http';
import * as jose from 'jose';
import type { TestService } from './service.js';
import { bearer } from './http.js';
import { SCOPES } from '../../engine/protocol.js';
import { LocalIssuer } from '../../engine/identity/id-tokens.js';
import { generateKey } from '../../engine/identity/key-format.js';
import { encodeWav } from '../../engine/audio/wav.js';
import { endedConversation, setUserHook } from './webhooks.js';
import { waitFor } from './until.js';
import { formFile } from './voices.js';

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
  json: any;
}

export interface Call {
  method: string;
  path: string;
  headers?: Record<string, string>;
  /** Objects go as JSON; buffers as they are (with a content-type header of the caller's). */
  body?: unknown;
}

const REQUEST_TIMEOUT_MS = 180_000;

/** One keep-alive connection pool for the whole walk: a thousand requests without a thousand handshakes. */
export class Client {
  readonly #agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  constructor(readonly base: string) {}

  async send(c: Call): Promise<Answer> {
    try {
      return await this.#send(c);
    } catch (err) {
      // A kept-alive connection the server closed while idle: the request never reached it, so send it again.
      if ((err as { reused?: boolean }).reused !== true) throw err;
      return this.#send(c);
    }
  }

  #send(c: Call): Promise<Answer> {
    const headers: Record<string, string> = { ...c.headers };
    let payload: Buffer | undefined;
    if (c.body !== undefined) {
      payload = Buffer.isBuffer(c.body) ? c.body : Buffer.from(JSON.stringify(c.body));
      headers['content-type'] ??= 'application/json';
      headers['content-length'] = String(payload.length);
    }
    return new Promise((resolve, reject) => {
      const req = http.request(new URL(c.path, this.base), { method: c.method, headers, agent: this.#agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          const text = body.toString('utf8');
          let json: unknown;
          try {
            json = text ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json });
        });
        res.on('error', reject);
      });
      // A request that hangs names itself instead of timing the whole file out.
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms: ${c.method} ${c.path}`)), REQUEST_TIMEOUT_MS);
      req.on('close', () => clearTimeout(timer));
      req.on('error', (err) => reject(Object.assign(err, { reused: req.reusedSocket && (err as { code?: string }).code === 'ECONNRESET' })));
      req.end(payload);
    });
  }

  /** The head and first chunk of a streaming answer (server-sent events), then the connection is dropped. */
  peek(c: Call): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = http.request(new URL(c.path, this.base), { method: c.method, headers: c.headers ?? {}, agent: false }, (res) => {
        const done = (body: Buffer): void => {
          req.destroy();
          const text = body.toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json });
        };
        res.once('data', (d: Buffer) => done(d));
        res.once('end', () => done(Buffer.alloc(0)));
      });
      req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
      req.end();
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}

/** What one user holds, by the names the routes give their path parameters. */
export interface Holdings {
  uid: string;
  canary: string;
  token: string;
  /** A developer key with every scope, and its id. */
  devKey: string;
  key_id: string;
  mcpKey: string;
  /** A developer key that was revoked, and an assistant key that was. */
  revokedKey: string;
  revokedMcpKey: string;
  conversation_id: string;
  folder_id: string;
  memory_id: string;
  action_item_id: string;
  goal_id: string;
  person_id: string;
  sample_id: string;
  /** A private app, and a public one the user installed. */
  app_id: string;
  public_app_id: string;
  appSecret: string;
  publicAppSecret: string;
  delivery_id: string;
  id: string;
  job_id: string;
  upload_id: string;
  fcmToken: string;
  webhookSecrets: string[];
  notificationIds: number[];
  /** An SSE assistant session and a Streamable HTTP one, and the stream to close at the end. */
  mcpSseSession: string;
  mcpSession: string;
  closeSse: () => void;
}

async function ok(res: Promise<Answer>, what: string, status = 200): Promise<any> {
  const r = await res;
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.json;
}

/** 16 kHz mono PCM of a low tone with a little noise: audio for uploads whose content does not matter. */
export function tone(seconds: number): Int16Array {
  const out = new Int16Array(Math.round(seconds * 16000));
  for (let i = 0; i < out.length; i++) out[i] = Math.round(3000 * Math.sin((2 * Math.PI * 220 * i) / 16000)) + ((i * 7919) % 41) - 20;
  return out;
}

/** Opens an MCP Streamable HTTP session with `key`; answers its id. */
async function mcpSession(c: Client, key: string): Promise<string> {
  const res = await c.send({
    method: 'POST',
    path: '/v1/mcp',
    headers: { ...bearer(key), accept: 'application/json, text/event-stream' },
    body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'isolation', version: '1' } } },
  });
  const id = res.headers['mcp-session-id'];
  if (res.status !== 200 || typeof id !== 'string') throw new Error(`mcp session not opened: ${res.status} ${res.text.slice(0, 200)}`);
  return id;
}

/** Opens an MCP SSE stream with `key`; answers its session id and a function that closes it. */
function mcpSse(base: string, key: string): Promise<{ id: string; close: () => void }> {
  return new Promise((resolve, reject) => {
    const req = http.get(new URL('/v1/mcp/sse', base), { headers: bearer(key), agent: false }, (res) => {
      let buf = '';
      res.on('data', (d: Buffer) => {
        buf += d.toString();
        const m = /sessionId=([0-9a-f-]{36})/.exec(buf);
        if (m) resolve({ id: m[1]!, close: () => req.destroy() });
      });
    });
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
  });
}

/**
 * Gives `uid` data of every kind through the service's own routes (and, where no route writes it, its store):
 * every text carries `canary`, so a leak shows wherever it lands. `hookUrl` receives the user's and apps' webhooks.
 */
export async function seed(ts: TestService, c: Client, uid: string, canary: string, hookUrl: string, voiceSample: Int16Array): Promise<Holdings> {
  const token = await ts.token(uid, 24 * 3600);
  const id = bearer(token);
  const key = async (kind: 'dev' | 'mcp', scopes: readonly string[]): Promise<{ key: string; id: string }> => {
    const r = await ok(c.send({ method: 'POST', path: '/v1/dev/keys', headers: id, body: { name: `${canary} key`, key_type: kind, scopes } }), 'key');
    return { key: r.key as string, id: r.id as string };
  };
  const dev = await key('dev', SCOPES);
  const mcp = await key('mcp', SCOPES);
  const revoked = await key('dev', SCOPES);
  await ok(c.send({ method: 'DELETE', path: `/v1/dev/keys/${revoked.id}`, headers: id }), 'revoke', 204);
  const revokedMcp = await key('mcp', SCOPES);
  await ok(c.send({ method: 'DELETE', path: `/v1/dev/keys/${revokedMcp.id}`, headers: id }), 'revoke', 204);
  const k = bearer(dev.key);

  await setUserHook(ts, uid, hookUrl);
  await setUserHook(ts, uid, hookUrl, 'day_summary');
  const conv = await ok(c.send({
    method: 'POST',
    path: '/v1/dev/user/conversations/from-segments',
    headers: k,
    body: { transcript_segments: [
      { text: `${canary} I need to water the tulips tomorrow morning.`, start: 0, end: 3, is_user: true },
      { text: `${canary} Remember to call the gardener about the roses.`, start: 3.5, end: 7, speaker: 'SPEAKER_01', speaker_id: 1 },
    ] },
  }), 'conversation');
  await ok(c.send({ method: 'POST', path: '/v1/dev/user/conversations', headers: k, body: { text: `${canary} a note about the allotment and its shed.` } }), 'text conversation');
  const memory = await ok(c.send({ method: 'POST', path: '/v1/dev/user/memories', headers: k, body: { content: `${canary} grows tulips`, category: 'hobbies' } }), 'memory');
  const item = await ok(c.send({ method: 'POST', path: '/v1/dev/user/action-items', headers: k, body: { description: `${canary} buy bulbs` } }), 'action item');
  const goal = await ok(c.send({ method: 'POST', path: '/v1/dev/user/goals', headers: k, body: { title: `${canary} walk daily`, goal_type: 'numeric', target_value: 10000, max_value: 20000 } }), 'goal');
  await ok(c.send({ method: 'PATCH', path: `/v1/dev/user/goals/${goal.id}/progress?current_value=4000`, headers: k }), 'progress');
  const folder = await ok(c.send({ method: 'POST', path: '/v1/folders', headers: id, body: { name: `${canary} garden` } }), 'folder');
  await ok(c.send({ method: 'PUT', path: `/v1/folders/${folder.id}/conversations/${conv.id}`, headers: id }), 'file conversation');

  const person = await ok(c.send({ method: 'POST', path: '/v1/users/people', headers: id, body: { name: `${canary} Robert` } }), 'person');
  const sample = await ts.service.services.voiceprints.addPersonSample(uid, person.id, { pcm: voiceSample, sampleRate: 16000 });
  if (!sample) throw new Error('voice sample not stored');

  const app = (priv: boolean, name: string) => ok(c.send({
    method: 'POST',
    path: '/v1/apps',
    headers: id,
    body: { name, description: priv ? `${canary} app` : 'Notes for everyone', capabilities: ['external_integration'], private: priv, external_integration: { triggers_on: 'memory_creation', webhook_url: hookUrl, auth_url: 'https://example.org/connect' } },
  }), 'app');
  const privateApp = await app(true, `${canary} private app`);
  // Others see a public app's name: it carries no canary.
  const publicApp = await app(false, `Public notes of ${uid}`);
  await ok(c.send({ method: 'POST', path: `/v1/apps/${publicApp.id}/install`, headers: id }), 'install');
  await ok(c.send({ method: 'POST', path: `/v1/apps/${privateApp.id}/install`, headers: id }), 'install');
  const webhookSecrets = [
    (await ok(c.send({ method: 'GET', path: '/v1/users/developer/webhook-secret', headers: id }), 'secret')).secret as string,
    (await ok(c.send({ method: 'GET', path: `/v1/apps/${privateApp.id}/webhook-secret`, headers: id }), 'secret')).secret as string,
    (await ok(c.send({ method: 'GET', path: `/v1/apps/${publicApp.id}/webhook-secret`, headers: id }), 'secret')).secret as string,
  ];

  // A recorded conversation ended as a session ends it: processed, then delivered to the user's webhook.
  await endedConversation(ts, uid);
  const delivery = await waitFor(async () => {
    const list = (await c.send({ method: 'GET', path: '/v1/users/developer/webhooks/deliveries', headers: id })).json as { id: string; state: string }[];
    return list.find((d) => d.state === 'delivered');
  }, { what: 'a delivered webhook', timeoutMs: 30_000 });

  const fcmToken = `${canary}-push-${uid}-token`;
  await ok(c.send({ method: 'POST', path: '/v1/users/fcm-token', headers: id, body: { fcm_token: fcmToken, time_zone: 'UTC' } }), 'push token');
  await ok(c.send({ method: 'PATCH', path: '/v1/users/settings', headers: id, body: { name: `${canary} Name` } }), 'settings');
  const notificationIds: number[] = [];
  for (let i = 0; i < 2; i++) {
    const n = await ts.service.services.notifier.notify(uid, { title: `${canary} reminder ${i}`, body: `${canary} tulips`, data: { navigate_to: '/home' }, source: 'system' });
    notificationIds.push(n.id);
  }
  const summary = await ok(c.send({ method: 'POST', path: '/v1/users/daily-summaries', headers: id }), 'day summary');

  const upload = await ok(c.send({ method: 'POST', path: '/v2/sync-local-files/uploads', headers: id, body: { filename: `rec_${Math.floor(ts.clock.now() / 1000) - 7200}.wav`, size: 64000 } }), 'upload', 201);
  const form = formFile('files', `rec_${Math.floor(ts.clock.now() / 1000) - 3600}.wav`, encodeWav(tone(1), 16000));
  const job = await ok(c.send({ method: 'POST', path: '/v2/sync-local-files', headers: { ...id, 'content-type': form.contentType }, body: form.body }), 'sync batch', 202);

  const sse = await mcpSse(c.base, mcp.key);
  const session = await mcpSession(c, mcp.key);
  return {
    uid,
    canary,
    token,
    devKey: dev.key,
    key_id: dev.id,
    mcpKey: mcp.key,
    revokedKey: revoked.key,
    revokedMcpKey: revokedMcp.key,
    conversation_id: conv.id,
    folder_id: folder.id,
    memory_id: memory.id,
    action_item_id: item.id,
    goal_id: goal.id,
    person_id: person.id,
    sample_id: sample.sampleId,
    app_id: privateApp.id,
    public_app_id: publicApp.id,
    appSecret: privateApp.secret,
    publicAppSecret: publicApp.secret,
    delivery_id: delivery.id,
    id: summary.id,
    job_id: job.job_id,
    upload_id: upload.upload_id,
    fcmToken,
    webhookSecrets,
    notificationIds,
    mcpSseSession: sse.id,
    mcpSession: session,
    closeSse: sse.close,
  };
}

/** ID tokens for `uid` that the service must refuse, by what is wrong with them. */
export async function badIdTokens(ts: TestService, uid: string): Promise<Record<string, string>> {
  const config = ts.service.services.config;
  const issuer = await LocalIssuer.open(ts.dataDir, { issuer: config.idTokenIssuer, audience: config.idTokenAudience, clockToleranceS: 0, clock: ts.clock });
  const nowS = Math.floor(ts.clock.now() / 1000);
  const claims = (o: { iss?: string; aud?: string; exp?: number; nbf?: number }) =>
    new jose.SignJWT({})
      .setSubject(uid)
      .setIssuer(o.iss ?? config.idTokenIssuer)
      .setAudience(o.aud ?? config.idTokenAudience)
      .setIssuedAt(nowS - 60)
      .setExpirationTime(o.exp ?? nowS + 3600)
      .setNotBefore(o.nbf ?? nowS - 60);
  const { privateKey: otherKey } = await jose.generateKeyPair('ES256');
  const good = await ts.token(uid);
  const [h, p, sig] = good.split('.') as [string, string, string];
  const flipped = `${sig.slice(0, 10)}${sig[10] === 'A' ? 'B' : 'A'}${sig.slice(11)}`;
  const b64 = (o: unknown): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  const payload = { sub: uid, iss: config.idTokenIssuer, aud: config.idTokenAudience, iat: nowS, exp: nowS + 3600 };
  return {
    // Past any clock tolerance the service allows.
    expired: await claims({ exp: nowS - 3600 }).setProtectedHeader({ alg: 'ES256', kid: issuer.kid }).sign(issuer.privateKey),
    'not yet valid': await claims({ nbf: nowS + 600 }).setProtectedHeader({ alg: 'ES256', kid: issuer.kid }).sign(issuer.privateKey),
    'wrong audience': await claims({ aud: 'another-project' }).setProtectedHeader({ alg: 'ES256', kid: issuer.kid }).sign(issuer.privateKey),
    'wrong issuer': await claims({ iss: 'https://issuer.example.org' }).setProtectedHeader({ alg: 'ES256', kid: issuer.kid }).sign(issuer.privateKey),
    'another key': await claims({}).setProtectedHeader({ alg: 'ES256', kid: issuer.kid }).sign(otherKey),
    'alg none': `${b64({ alg: 'none', typ: 'JWT' })}.${b64(payload)}.`,
    'HS256 with the public key': await new jose.SignJWT(payload).setProtectedHeader({ alg: 'HS256', kid: issuer.kid }).sign(new TextEncoder().encode(JSON.stringify(issuer.publicJwk))),
    'bad signature': `${h}.${p}.${flipped}`,
    'payload swapped': `${h}.${b64({ ...payload, sub: `${uid}x` })}.${sig}`,
    malformed: 'not-a-token',
    'two parts': `${h}.${p}`,
  };
}

/** A developer key of the right form that was never issued. */
export const unknownKey = (): string => generateKey('dev').key;
