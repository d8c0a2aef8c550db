// Acknowledged audio across a crash: the listen node runs as a process of its own and is killed (SIGKILL) between two
// audio_acks; a new process on the same DATA_DIR, store and Redis hands the dead connection's audio to kept audio at
// start-up, and the provider fake hears every acknowledged sample the transcript did not already hold.
import { onJsonLines } from '../../helpers/json-lines.js';
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import knexFactory from 'knex';
import { Redis } from 'ioredis';
import { loadConfig } from '../../../engine/config.js';
import { LocalIssuer } from '../../../engine/identity/id-tokens.js';
import { systemClock } from '../../../engine/clock.js';
import { ListenClient } from '../../helpers/listen.js';
import { speak } from '../../helpers/speech.js';
import { PG_URL, storeEnv } from '../../helpers/stores.js';
import { until, waitFor } from '../../helpers/until.js';
import { startFakeDeepgram, type FakeStream } from '../../fakes/deepgram-server.js';
import WebSocket from 'ws';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const ENTRY = fileURLToPath(new URL('../../../engine/index.js', import.meta.url));
const FRAME = 320; // 20 ms of 16 kHz pcm16
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

interface Node {
  child: ChildProcess;
  port: number;
}

/** The real entry point in a process of its own; resolves once it listens. */
function startNode(t: Test, env: Record<string, string>): Promise<Node> {
  const child = spawn(process.execPath, [ENTRY], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void child.kill('SIGKILL'));
  return new Promise((resolve, reject) => {
    onJsonLines(child.stdout!, (line) => {
      if (line.msg === 'listening') resolve({ child, port: line.port as number });
    });
    child.on('exit', (code) => reject(new Error(`listen node exited with ${code} before listening`)));
  });
}

function lastAck(c: ListenClient): number {
  let best = -1;
  for (const f of c.frames) if (f.startsWith('{"type":"audio_ack"')) best = Math.max(best, JSON.parse(f).offset_ms as number);
  return best;
}

const samplesOf = (streams: readonly FakeStream[]): Int16Array => {
  const b = Buffer.concat(streams.flatMap((s) => s.audio));
  return new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};

/** Where `part` starts inside `whole` (searching frame boundaries), or -1. */
function indexOf(whole: Int16Array, part: Int16Array): number {
  for (let at = 0; at + part.length <= whole.length; at += FRAME) {
    let i = 0;
    while (i < part.length && whole[at + i] === part[i]) i++;
    if (i === part.length) return at;
  }
  return -1;
}

t.test('listen node killed between acks: every acknowledged millisecond reaches the provider and the transcript', async (t) => {
  // The live stream says "alpha" over its first second; a stream opened later (the kept audio) says "charlie" and "delta".
  const fake = await startFakeDeepgram({ apiKey: 'dg-key', recordAudio: true, fallback: { kind: 'accept', results: [{ afterS: 0.2, words: [{ word: 'charlie', start: 0, end: 0.2 }] }, { afterS: 1e6, words: [{ word: 'delta', start: 0.3, end: 0.5 }] }] } });
  t.teardown(() => fake.close());
  fake.script({ kind: 'accept', results: [{ afterS: 1, words: [{ word: 'alpha', start: 0.2, end: 0.8 }] }] });
  const prefix = `test-${randomUUID()}`;
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: t.testdir(),
    REDIS_URL,
    REDIS_PREFIX: prefix,
    REDIS_EMBEDDED: 'never',
    LOG_LEVEL: 'info',
    STT_PROVIDERS: 'provider_a',
    PROVIDER_A_API_KEY: 'dg-key',
    PROVIDER_A_URL: fake.url,
    ...storeEnv(t, 'pg'),
  };
  const config = loadConfig(env);
  // espeak-ng refuses a path as long as the test's own dir.
  const scratch = mkdtempSync(path.join(tmpdir(), 'crash-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const pcm = speak(scratch, 'Every acknowledged word survives a crash of the listen node', 'crash');
  const a = await startNode(t, env);
  const issuer = await LocalIssuer.open(config.dataDir, { issuer: config.idTokenIssuer, audience: config.idTokenAudience, clockToleranceS: 0, clock: systemClock });
  const token = await issuer.sign('u1', 3600);
  const ws = new WebSocket(`ws://127.0.0.1:${a.port}/v4/listen?uid=u1&codec=pcm16&sample_rate=16000&ack=enabled`, { headers: { authorization: `Bearer ${token}` } });
  const c = new ListenClient(ws);
  await c.json((m) => m.type === 'audio_session', 30_000);
  await c.ready();

  // Three seconds sent as a device would (a frame per 20 ms); then the ack covering them, and "alpha" stored.
  let sent = 0;
  const send = (): void => void c.ws.send(new Uint8Array(pcm.buffer, pcm.byteOffset + sent++ * FRAME * 2, FRAME * 2));
  while (sent < 150) {
    send();
    await new Promise((r) => setTimeout(r, 20));
  }
  await until(() => lastAck(c) >= 3000, { what: 'audio_ack for 3 s', timeoutMs: 20_000 });
  await c.next((f) => f.includes('alpha'), 20_000);
  // More audio, then the kill before the next ack can cover it.
  for (let n = 0; n < 25; n++) send();
  const acked = lastAck(c);
  a.child.kill('SIGKILL');
  await new Promise((r) => a.child.once('exit', r));
  t.ok(acked >= 3000 && acked < 3500, `killed between acks (last ack ${acked} ms, ${sent * 20} ms sent)`);

  // The dead writer's heartbeat lapses; the next node's start-up sweep then takes its unfinished connection over.
  const redis = new Redis(REDIS_URL);
  t.teardown(() => redis.quit());
  await until(async () => (await redis.keys(`${prefix}:audio-log:writer:*`)).length === 0, { what: 'the dead writer\'s heartbeat to lapse', timeoutMs: 20_000 });
  await startNode(t, env);
  await until(() => fake.streams.length >= 2 && !fake.streams[1]!.open, { what: 'the kept audio transcribed', timeoutMs: 30_000 });

  const live = samplesOf(fake.streams.slice(0, 1));
  const kept = samplesOf(fake.streams.slice(1));
  t.equal(indexOf(pcm, live), 0, 'the live stream heard the start of the audio');
  const from = indexOf(pcm, kept);
  t.ok(from >= 0, 'the kept audio is the device\'s audio, sample for sample');
  t.ok(from <= 0.8 * 16000, `kept audio starts (${from / 16} ms) no later than the transcript's end (800 ms)`);
  t.ok(from + kept.length >= (acked * 16000) / 1000, `kept audio reaches ${(from + kept.length) / 16} ms, past the last ack (${acked} ms)`);

  const db = knexFactory({ client: 'pg', connection: PG_URL, searchPath: [env.DATABASE_SCHEMA!] });
  t.teardown(() => db.destroy());
  const words = await waitFor(async () => {
    const rows = (await db('conversation_segments as s').join('conversations as c', 'c.id', 's.conversation_id').where('c.user_id', 'u1').orderBy('s.start').select('s.text')) as { text: string }[];
    const w = rows.flatMap((r) => r.text.split(/\s+/)).filter(Boolean);
    return w.includes('delta') ? w : undefined;
  }, { what: 'the kept audio\'s words stored', timeoutMs: 20_000 });
  t.same(words, ['alpha', 'charlie', 'delta'], 'the scripted words, once each, in order');
  const conversations = (await db('conversations').where({ user_id: 'u1' }).select('id')) as unknown[];
  t.equal(conversations.length, 1, 'in the conversation the session recorded into');
});
