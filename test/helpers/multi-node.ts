// A deployment of real service processes (`node dist/engine/index.js`): two ROLE=listen, one ROLE=api and one
// ROLE=jobs on one PostgreSQL schema and one Redis, with a Deepgram-protocol provider fake, the FCM fake and webhook
// receivers in the test process; devices stream real Opus-encoded speech. `runMultiNodeScenario` is the end-to-end
// check every deployment shape runs (the Redis URL is a parameter: a standalone server or a cluster).
import { onJsonLines } from './json-lines.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import WebSocket from 'ws';
import { loadConfig } from '../../engine/config.js';
import { systemClock } from '../../engine/clock.js';
import { LocalIssuer } from '../../engine/identity/id-tokens.js';
import { OpusEncoderStream } from '../../native/opus.js';
import { startFakeDeepgram, type FakeDeepgram } from '../fakes/deepgram-server.js';
import { startFakeFcm, writeServiceAccount, type FakeFcm } from '../fakes/fcm-server.js';
import { frames } from './codec-fixtures.js';
import { bearer, request, type TestRequest, type TestResponse } from './http.js';
import { ListenClient } from './listen.js';
import { speak, silence, concat } from './speech.js';
import { storeEnv } from './stores.js';
import { until, waitFor } from './until.js';
import { receiver, verified, type Receiver } from './webhooks.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ENTRY = fileURLToPath(new URL('../../engine/index.js', import.meta.url));

export type Role = 'api' | 'listen' | 'jobs';

/** One service process: its JSON log lines as they come, the port it logged, how it ended. */
export interface NodeProcess {
  readonly role: Role;
  readonly name: string;
  readonly child: ChildProcess;
  readonly port: number;
  readonly url: string;
  readonly lines: Record<string, unknown>[];
  /** Its exit code (null when a signal ended it). */
  readonly exited: Promise<number | null>;
  req(path: string, opts?: TestRequest): Promise<TestResponse>;
  /** Resolves once a log line with this `msg` was written (or already was). */
  logged(msg: string, timeoutMs?: number): Promise<Record<string, unknown>>;
}

/** Starts `node dist/engine/index.js` (or `entry`) with `env`; resolves once it logged `listening`. Killed at teardown. */
export function startNode(t: Test, name: string, role: Role, env: Record<string, string>, entry = ENTRY): Promise<NodeProcess> {
  const child = spawn(process.execPath, [entry], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env, ROLE: role }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  let code: number | null | undefined;
  const exited = new Promise<number | null>((r) => child.on('exit', (c) => r((code = c))));
  t.teardown(() => {
    if (code === undefined) child.kill('SIGKILL');
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()).length > 8192 && (stderr = stderr.slice(-4096)));
  return new Promise((resolve, reject) => {
    onJsonLines(child.stdout!, (line) => {
      lines.push(line);
      if (line.msg === 'listening') {
        const port = line.port as number;
        const url = `http://127.0.0.1:${port}`;
        resolve({
          role,
          name,
          child,
          port,
          url,
          lines,
          exited,
          req: (path, o) => request(url, path, o),
          logged: (msg, timeoutMs = 30_000) => waitFor(() => lines.find((l) => l.msg === msg), { what: `"${msg}" in the log of ${name}`, timeoutMs, everyMs: 20 }),
        });
      }
    });
    void exited.then((c) => reject(new Error(`${name} exited with ${c} before listening: ${JSON.stringify(lines.at(-1) ?? {})} ${stderr.slice(-2000)}`)));
  });
}

export interface Deployment {
  /** The environment every node shares (each adds its ROLE). */
  readonly env: Record<string, string>;
  /** The shared DATA_DIR (the test's own directory). */
  readonly dataDir: string;
  readonly api: NodeProcess;
  readonly listen: NodeProcess[];
  readonly jobs: NodeProcess;
  /** Every jobs node, `jobs` first. */
  readonly jobsNodes: NodeProcess[];
  readonly provider: FakeDeepgram;
  readonly fcm: FakeFcm;
  /** An ID token for `uid` from the deployment's local issuer (DATA_DIR is shared). */
  token(uid: string): Promise<string>;
  /** Starts one more node of the deployment (a replacement after a kill). */
  add(name: string, role: Role, env?: Record<string, string>, entry?: string): Promise<NodeProcess>;
}

export interface DeploymentOptions {
  redisUrl: string;
  /** Settings for every node on top of the deployment's own. */
  env?: Record<string, string>;
  /** The listen nodes' port; 0 (default) lets each pick one. A fixed port is shared (SO_REUSEPORT). */
  listenPort?: number;
  listenNodes?: number;
  /** @defaultValue 1 */
  jobsNodes?: number;
  /** The module every node runs. @defaultValue dist/engine/index.js */
  entry?: string;
}

/** The provider fake answers five filler words for every second of audio it receives. */
export const WORDS_PER_PROVIDER_SECOND = 5;

/** Starts the fakes, then the api node (it runs the migrations and creates the token issuer), then the others. */
/**
 * What every service process of a test deployment shares: loopback, its own Redis prefix (no embedded Redis), a
 * PostgreSQL schema of the test's own, provider_a on the Deepgram fake, one codec thread.
 */
export function processEnv(t: Test, redisUrl: string, provider: FakeDeepgram): Record<string, string> {
  return {
    HOST: '127.0.0.1',
    REDIS_URL: redisUrl,
    REDIS_PREFIX: `test-${randomUUID()}`,
    REDIS_EMBEDDED: 'never',
    LOG_LEVEL: 'info',
    ...storeEnv(t, 'pg'),
    STT_PROVIDERS: 'provider_a',
    PROVIDER_A_URL: provider.url,
    PROVIDER_A_API_KEY: 'test-key',
    CODEC_THREADS: '1',
  };
}

export async function startDeployment(t: Test, o: DeploymentOptions): Promise<Deployment> {
  const provider = await startFakeDeepgram({ fallback: { kind: 'accept', autoEveryS: 1 }, sweepEveryMs: 0 });
  t.teardown(() => provider.close());
  const account = writeServiceAccount();
  const fcm = await startFakeFcm(account);
  t.teardown(() => fcm.close());
  const env: Record<string, string> = {
    ...processEnv(t, o.redisUrl, provider),
    PORT: '0',
    DATA_DIR: t.testdir(),
    // Every sample the device sends reaches the provider: the test counts audio seconds end to end.
    VAD_GATE: 'off',
    WEBHOOK_ALLOW_PRIVATE: 'on',
    FCM_SERVICE_ACCOUNT_FILE: account.file,
    FCM_TOKEN_URL: fcm.tokenUrl,
    FCM_BASE_URL: fcm.url,
    SHUTDOWN_TIMEOUT_MS: '20000',
    ...o.env,
  };
  const add = (name: string, role: Role, extra: Record<string, string> = {}, entry?: string): Promise<NodeProcess> => startNode(t, name, role, { ...env, ...extra }, entry ?? o.entry);
  const api = await add('api', 'api');
  const listenEnv: Record<string, string> = o.listenPort ? { PORT: String(o.listenPort) } : {};
  const jobsCount = o.jobsNodes ?? 1;
  const started = await Promise.all([
    ...Array.from({ length: jobsCount }, (_, i) => add(i === 0 ? 'jobs' : `jobs-${i}`, 'jobs')),
    ...Array.from({ length: o.listenNodes ?? 2 }, (_, i) => add(`listen-${i}`, 'listen', listenEnv)),
  ]);
  const jobsNodes = started.slice(0, jobsCount);
  const listen = started.slice(jobsCount);
  const config = loadConfig(env);
  const issuer = await LocalIssuer.open(config.dataDir, { issuer: config.idTokenIssuer, audience: config.idTokenAudience, clockToleranceS: 0, clock: systemClock });
  return { env, dataDir: config.dataDir, api, listen, jobs: jobsNodes[0]!, jobsNodes, provider, fcm, token: (uid) => issuer.sign(uid, 3600), add };
}

/** Opens /v4/listen on `port`; rejects when the upgrade is refused. */
export function openSession(port: number, token: string, query: Record<string, string>): Promise<ListenClient> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/v4/listen?${new URLSearchParams(query).toString()}`, { headers: { authorization: `Bearer ${token}` } });
  const client = new ListenClient(ws);
  return new Promise((resolve, reject) => {
    ws.on('open', () => resolve(client));
    ws.on('unexpected-response', (_q, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.on('error', reject);
  });
}

/** Real speech (espeak-ng) with a little silence after it, encoded as 20 ms Opus packets at 16 kHz. */
export function speechPackets(dir: string): Uint8Array[] {
  const pcm = concat(speak(dir, 'Remember to call the dentist tomorrow morning and buy milk on the way home.'), silence(0.5));
  const enc = new OpusEncoderStream(16000);
  return frames(pcm, 320).map((f) => enc.encode(f));
}

/** Seconds of audio in `n` packets of 20 ms. */
export const packetSeconds = (n: number): number => n * 0.02;

/** Audio seconds the provider fake received over every stream so far. */
export const providerSeconds = (p: FakeDeepgram): number => p.streams.reduce((s, x) => s + x.audioS, 0);

/** Words of a conversation's transcript, read through the REST API. */
export async function transcriptWords(node: NodeProcess, token: string, id: string): Promise<number> {
  const res = await node.req(`/v1/conversations/${id}?include_transcript=true`, { headers: bearer(token) });
  if (res.status !== 200) throw new Error(`conversation ${id}: ${res.status}`);
  return (res.json.transcript_segments as { text: string }[]).reduce((n, s) => n + s.text.split(/\s+/).filter(Boolean).length, 0);
}

/** Ends the user's recording through POST /v1/conversations on `node`; answers the ended conversation's id. */
export async function endRecording(node: NodeProcess, token: string): Promise<string> {
  const res = await node.req('/v1/conversations', { method: 'POST', headers: bearer(token), body: {} });
  if (res.status !== 200) throw new Error(`end of recording: ${res.status} ${res.text}`);
  return res.json.memory.id as string;
}

/** A user's conversation status through the REST API. */
export async function statusOf(node: NodeProcess, token: string, id: string): Promise<string> {
  const res = await node.req(`/v1/conversations/${id}`, { headers: bearer(token) });
  return res.status === 200 ? (res.json.status as string) : `http ${res.status}`;
}

export interface ScenarioFigures {
  sessionsPerListenNode: number[];
  conversations: number;
  /** Conversations processed per second, from the first end of recording to the last memory_created. */
  jobsPerSecond: number;
  audioSecondsSent: number;
  audioSecondsAtProvider: number;
  webhookAttempts: number;
}

const USERS = 6;

/**
 * The multi-node scenario: sessions on both listen nodes, their ends through the api node, processing on the jobs node,
 * `memory_created` (with an installed app's reply) back on whichever listen node holds the session, the developer
 * webhook once per conversation (its first attempt refused for half the users, resent under the same webhook-id), a
 * push through FCM once, rate limits and key revocation shared across nodes.
 */
export async function runMultiNodeScenario(t: Test, o: { redisUrl: string }): Promise<ScenarioFigures> {
  const t0 = Date.now();
  const mark = (what: string): void => void t.comment(`${what}: ${Date.now() - t0} ms`);
  // The rate limit is low enough to reach in a few requests; its counters live in Redis, shared by every node.
  const d = await startDeployment(t, { redisUrl: o.redisUrl, env: { RATE_LIMIT_PER_MINUTE: '6' } });
  const { api, listen, jobs, provider, fcm } = d;
  mark('four processes listening');
  const packets = speechPackets(d.dataDir);
  const uids = Array.from({ length: USERS }, (_, i) => `mn-user-${i}`);
  const tokens = new Map(await Promise.all(uids.map(async (u) => [u, await d.token(u)] as const)));
  const tok = (u: string): string => tokens.get(u)!;

  // The developer webhook of every user, and an app (installed by the first user) that replies to memory_creation.
  // The first attempt of every odd-numbered user's delivery is refused (503): it is sent again, same webhook-id.
  const failedOnce = new Set<string>();
  const hooks = await receiver(t, (req, res) => {
    const uid = new URL(req.url ?? '/', 'http://x').searchParams.get('uid') ?? '';
    const index = uids.indexOf(uid);
    const wid = String(req.headers['webhook-id']);
    if (index % 2 === 1 && !failedOnce.has(wid)) {
      failedOnce.add(wid);
      res.writeHead(503).end('{}');
      return;
    }
    res.end('{}');
  });
  for (const u of uids) {
    const r = await api.req('/v1/users/developer/webhook/memory_created', { method: 'POST', headers: bearer(tok(u)), body: { url: hooks.url } });
    t.equal(r.status, 200, `webhook of ${u} saved on the api node`);
  }
  const appRx = await receiver(t, (_q, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'Saved to your notes.' })));
  const created = await api.req('/v1/apps', {
    method: 'POST',
    headers: bearer(await d.token('app-dev')),
    body: { name: 'Notes', description: 'Keeps notes', capabilities: ['external_integration'], private: false, external_integration: { triggers_on: 'memory_creation', webhook_url: appRx.url } },
  });
  t.equal(created.status, 200, 'app created');
  const app = { id: created.json.id as string, secret: created.json.secret as string };
  t.equal((await api.req(`/v1/apps/${app.id}/install`, { method: 'POST', headers: bearer(tok(uids[0]!)) })).status, 200, 'app installed');

  // Sessions: users alternate between the two listen nodes.
  const sessions = await Promise.all(
    uids.map(async (u, i) => {
      const node = listen[i % listen.length]!;
      const c = await openSession(node.port, tok(u), { uid: u, codec: 'opus', sample_rate: '16000', language: 'en' });
      await c.ready();
      return { uid: u, node, c };
    }),
  );
  mark('sessions ready');
  const sent = packetSeconds(packets.length) * sessions.length;
  for (const s of sessions) for (const p of packets) s.c.ws.send(p);
  await until(() => providerSeconds(provider) >= sent - 1e-6, { what: 'every second of audio at the provider', timeoutMs: 30_000 });

  mark('audio at the provider');
  // Ends go to the api node; the sessions that end them live on the listen nodes (Redis carries the request).
  const started = Date.now();
  const ids = new Map<string, string>();
  await Promise.all(sessions.map(async (s) => ids.set(s.uid, await endRecording(api, tok(s.uid)))));
  const events = await Promise.all(sessions.map((s) => s.c.json((m) => m.type === 'memory_created', 60_000)));
  const elapsedS = (Date.now() - started) / 1000;
  mark('memory_created everywhere');
  sessions.forEach((s, i) => t.equal(events[i].memory.id, ids.get(s.uid), `memory_created reached ${s.uid} on ${s.node.name}`));
  t.same(events[0].messages.map((m: { text: string; app_id: string }) => [m.app_id, m.text]), [[app.id, 'Saved to your notes.']], "the app's reply rides in memory_created");

  for (const s of sessions) {
    const id = ids.get(s.uid)!;
    t.equal(await statusOf(api, tok(s.uid), id), 'completed', `${id} completed`);
    // The provider says five words per second of audio and for the part-second its last answer covers: all stored.
    t.equal(await transcriptWords(api, tok(s.uid), id), Math.ceil(packetSeconds(packets.length) - 1e-9) * WORDS_PER_PROVIDER_SECOND, `every word of ${s.uid} in its transcript`);
  }

  // Webhooks: one delivery per conversation; a refused first attempt was sent again under the same webhook-id.
  const secrets = new Map<string, string>();
  await until(() => hooks.received.length >= USERS + USERS / 2, { what: 'every delivery, retries included', timeoutMs: 40_000 });
  mark('webhooks delivered');
  const byConversation = new Map<string, { ids: Set<string>; attempts: number }>();
  for (const r of hooks.received) {
    const uid = r.query.get('uid')!;
    const secret = secrets.get(uid) ?? (await secretOf(api, tok(uid)));
    secrets.set(uid, secret);
    const id = (verified(r, secret) as { id: string }).id;
    const e = byConversation.get(id) ?? { ids: new Set<string>(), attempts: 0 };
    e.ids.add(String(r.headers['webhook-id']));
    e.attempts++;
    byConversation.set(id, e);
  }
  for (const [i, u] of uids.entries()) {
    const e = byConversation.get(ids.get(u)!);
    t.ok(e, `${u}: delivered`);
    t.equal(e?.ids.size, 1, `${u}: one webhook-id`);
    t.equal(e?.attempts, i % 2 === 1 ? 2 : 1, i % 2 === 1 ? `${u}: refused once, sent again` : `${u}: sent once`);
  }
  t.equal(byConversation.size, USERS, 'no delivery for anything else');
  t.equal(appRx.received.length, 1, 'the app heard of its user\'s conversation once');
  // Every conversation was processed once: one memory_created per session, no second one queued behind it.
  for (const s of sessions) t.equal(s.c.frames.filter((f) => f.includes('"memory_created"')).length, 1, `one memory_created for ${s.uid}`);

  // A push: the app notifies its user through a listen node; the jobs node sends it to the device once.
  const device = 'cPhone1234567890abcdef:APA91bMultiNodeDevice';
  t.equal((await listen[1]!.req('/v1/users/fcm-token', { method: 'POST', headers: bearer(tok(uids[0]!)), body: { fcm_token: device } })).status, 200);
  const notified = await listen[1]!.req(`/v2/integrations/${app.id}/notification?uid=${uids[0]}&message=${encodeURIComponent('Your notes are ready')}`, { method: 'POST', headers: bearer(app.secret) });
  t.equal(notified.status, 200, 'notification accepted on a listen node');
  await until(() => fcm.sent.length === 1, { what: 'the push', timeoutMs: 20_000 });
  t.same(fcm.sent.map((m) => [m.token, m.body]), [[device, 'Your notes are ready']], 'one push to the device');

  // Rate limit: six requests a minute per key, counted across nodes.
  const keyRes = await api.req('/v1/dev/keys', { method: 'POST', headers: bearer(tok(uids[2]!)), body: { name: 'multi-node' } });
  t.equal(keyRes.status, 200);
  const key = keyRes.json.key as string;
  const nodes = [api, listen[0]!, listen[1]!, jobs];
  // The windows are wall-clock minutes in every process: start the eight requests well inside one.
  while (Date.now() % 60_000 > 50_000) await new Promise((r) => setTimeout(r, 250));
  const statuses: number[] = [];
  for (let i = 0; i < 8; i++) statuses.push((await nodes[i % nodes.length]!.req('/v1/dev/user/conversations', { headers: bearer(key) })).status);
  t.same(statuses, [200, 200, 200, 200, 200, 200, 429, 429], 'the seventh request is refused, whichever node it reaches');

  // Revocation on the api node: refused on every node at once.
  const key2Res = await api.req('/v1/dev/keys', { method: 'POST', headers: bearer(tok(uids[4]!)), body: { name: 'revoked' } });
  const key2 = key2Res.json.key as string;
  t.equal((await listen[0]!.req('/v1/dev/user/conversations', { headers: bearer(key2) })).status, 200, 'the key works on a listen node (and is cached there)');
  t.equal((await api.req(`/v1/dev/keys/${key2Res.json.id as string}`, { method: 'DELETE', headers: bearer(tok(uids[4]!)) })).status, 204, 'revoked on the api node');
  // The broadcast leaves Redis before the DELETE is answered; a node reads it within milliseconds, far inside the
  // 60 s its cache would otherwise keep the key.
  let acceptedAfter = 0;
  for (const n of [listen[0]!, listen[1]!, jobs]) {
    await until(async () => {
      const status = (await n.req('/v1/dev/user/conversations', { headers: bearer(key2) })).status;
      if (status === 200) acceptedAfter++;
      return status === 401;
    }, { what: `the revoked key refused on ${n.name}`, timeoutMs: 5000, everyMs: 50 });
  }
  t.equal(acceptedAfter, 0, 'refused on every other node at once');

  for (const s of sessions) s.c.close();
  const perNode = listen.map((n) => sessions.filter((s) => s.node === n).length);
  return {
    sessionsPerListenNode: perNode,
    conversations: sessions.length,
    jobsPerSecond: sessions.length / elapsedS,
    audioSecondsSent: sent,
    audioSecondsAtProvider: providerSeconds(provider),
    webhookAttempts: hooks.received.length,
  };
}

/** The user's current memory_created signing secret, through the API. */
async function secretOf(node: NodeProcess, token: string): Promise<string> {
  const res = await node.req('/v1/users/developer/webhook-secret', { headers: bearer(token) });
  if (res.status !== 200) throw new Error(`secret: ${res.status} ${res.text}`);
  return res.json.secret as string;
}

/**
 * A wearable streaming Opus in real time with acknowledged audio (`ack=enabled`): it keeps every packet past the last
 * `audio_ack`, and when its session closes (a drain's 1012, a crash's 1006) it resumes on the node `next` names, from
 * that ack, and goes on streaming.
 */
export class Device {
  /** Packets sent (each 20 ms), resends not counted. */
  sent = 0;
  /** The last audio_ack's offset, in milliseconds. */
  acked = 0;
  sessionId = '';
  client: ListenClient | undefined;
  node: NodeProcess | undefined;
  /** Every close this device saw, with the node that closed it. */
  readonly closes: { node: string; code: number; reason: string }[] = [];
  readonly nodes: string[] = [];
  /** Resumes that failed. */
  readonly errors: string[] = [];
  #timer: NodeJS.Timeout | undefined;
  #reconnecting: Promise<void> | undefined;

  constructor(
    readonly uid: string,
    readonly token: string,
    readonly packets: readonly Uint8Array[],
    /** The node to resume on after `from` closed the session. */
    readonly next: (from: NodeProcess) => NodeProcess,
  ) {}

  /** Connects to `node` (resuming when the device already has a session) and waits for `ready`. */
  async connect(node: NodeProcess): Promise<void> {
    const query: Record<string, string> = { uid: this.uid, codec: 'opus', sample_rate: '16000', language: 'en', ack: 'enabled' };
    if (this.sessionId) Object.assign(query, { resume: this.sessionId, offset_ms: String(this.acked) });
    const c = await openSession(node.port, this.token, query);
    this.client = c;
    this.node = node;
    this.nodes.push(node.name);
    c.ws.on('message', (data, isBinary) => {
      const text = String(data);
      if (isBinary || !text.startsWith('{"type":"audio_ack"')) return;
      const m = JSON.parse(text) as { offset_ms?: number };
      if (typeof m.offset_ms === 'number') this.acked = Math.max(this.acked, m.offset_ms);
    });
    const closed = c.closed.then((x) => {
      this.closes.push({ node: node.name, ...x });
      if (this.client === c) this.client = undefined;
      if (this.#timer !== undefined && x.code !== 1000) {
        this.#reconnecting ??= this.connect(this.next(node))
          .catch((err: Error) => void this.errors.push(err.message))
          .finally(() => (this.#reconnecting = undefined));
      }
    });
    void closed;
    const session = await c.json((m) => m.type === 'audio_session', 30_000);
    this.sessionId = session.session_id as string;
    await c.ready();
    // Everything past the last ack goes again: the service drops by offset what it already holds.
    for (let i = Math.floor(this.acked / 20); i < this.sent; i++) c.ws.send(this.packets[i % this.packets.length]!);
  }

  /** Records five packets (100 ms) per tick, sent at once while connected. */
  start(): void {
    this.#timer = setInterval(() => {
      // The device records whether or not it is connected; what it could not send goes after the resume.
      const c = this.client;
      const live = c !== undefined && c.ws.readyState === c.ws.OPEN && this.#reconnecting === undefined;
      for (let k = 0; k < 5; k++) {
        if (live) c.ws.send(this.packets[this.sent % this.packets.length]!);
        this.sent++;
      }
    }, 100);
  }

  /** Stops streaming; the session stays open. Waits for a reconnect under way. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#reconnecting;
  }

  /** Waits for an ack covering every packet sent. */
  async allAcked(timeoutMs = 30_000): Promise<void> {
    await until(() => this.acked >= this.sent * 20, { what: `${this.uid}: every packet acknowledged`, timeoutMs });
  }
}

/** A deployment with two jobs nodes and devices ready to stream, each with a `memory_created` webhook to one receiver. */
export interface BusyDeployment {
  readonly d: Deployment;
  readonly l0: NodeProcess;
  readonly l1: NodeProcess;
  readonly hooks: Receiver;
  /** Each moves to the other listen node when its own goes away. */
  readonly devices: Device[];
}

/** Starts a {@link BusyDeployment}: `devices` users `<prefix>-<i>`, the receiver answering each delivery after `answerMs`. */
export async function startBusyDeployment(t: Test, o: { prefix: string; devices: number; answerMs: number; entry?: string }): Promise<BusyDeployment> {
  const began = Date.now();
  const d = await startDeployment(t, { redisUrl: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', env: { JOB_CONCURRENCY: '1' }, jobsNodes: 2, ...(o.entry ? { entry: o.entry } : {}) });
  const [l0, l1] = d.listen as [NodeProcess, NodeProcess];
  const packets = speechPackets(d.dataDir);
  t.comment(`five processes listening after ${Date.now() - began} ms`);
  const hooks = await receiver(t, (_q, res) => void setTimeout(() => res.end('{}'), o.answerMs));
  const devices = await Promise.all(
    Array.from({ length: o.devices }, async (_, i) => {
      const uid = `${o.prefix}-${i}`;
      const token = await d.token(uid);
      t.equal((await d.api.req('/v1/users/developer/webhook/memory_created', { method: 'POST', headers: bearer(token), body: { url: hooks.url } })).status, 200);
      return new Device(uid, token, packets, (from) => (from === l0 ? l1 : l0));
    }),
  );
  return { d, l0, l1, hooks, devices };
}

/**
 * Checks the busy deployment's webhooks once a delivery per conversation arrived: each verified with its user's
 * secret, one for each of `ids` and none for anything else, and every retry under its first attempt's webhook-id.
 */
export async function checkDeliveredOncePerConversation(t: Test, b: BusyDeployment, ids: readonly string[]): Promise<void> {
  const { hooks, devices } = b;
  await until(() => new Set(hooks.received.map((r) => String(r.headers['webhook-id']))).size >= devices.length, { what: 'a delivery per conversation', timeoutMs: 30_000 });
  const secrets = new Map<string, string>();
  const byConversation = new Map<string, Set<string>>();
  for (const r of hooks.received) {
    const uid = r.query.get('uid')!;
    const dev = devices.find((x) => x.uid === uid)!;
    secrets.set(uid, secrets.get(uid) ?? ((await b.d.api.req('/v1/users/developer/webhook-secret', { headers: bearer(dev.token) })).json.secret as string));
    const id = (verified(r, secrets.get(uid)!) as { id: string }).id;
    byConversation.set(id, (byConversation.get(id) ?? new Set()).add(String(r.headers['webhook-id'])));
  }
  t.same([...byConversation.keys()].sort(), [...ids].sort(), 'a delivery for each conversation, none for anything else');
  t.ok([...byConversation.values()].every((w) => w.size === 1), `one webhook-id per conversation (${hooks.received.length} attempts for ${devices.length})`);
}
