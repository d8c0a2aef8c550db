// Acknowledged audio on /v4/listen over real sockets: acks after the write pass, resume with de-duplication after cuts
// at random points, refusals, gaps, the session bound, retention on the injected clock, and a resume on another node.
import t from 'tap';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { startService, type TestService } from '../../helpers/service.js';
import { advance, connect, open, type ListenClient } from '../../helpers/listen.js';
import { until, waitFor } from '../../helpers/until.js';
import { RecordingSttEngine, type RecordingSttStream } from '../../fakes/recording-stt.js';
import { ConversationStatus } from '../../../engine/protocol.js';
import type { SttSegment } from '../../../engine/stt/types.js';
import { LocalAudioLogStore, RecordType, readSessionLog, type LogRecord, type MarkRecord } from '../../../engine/listen/audio-log.js';

// A hundred seeded cuts and reconnections of real-time audio: a few minutes on a busy box.
t.setTimeout(360_000);

/** 3 s of pcm16 at 16 kHz whose sample i is i - 24000: what a provider heard tells exactly which samples, in order. */
const SECONDS = 3;
const SAMPLES = SECONDS * 16000;
const FRAME_SAMPLES = 320; // 20 ms
const FRAMES = SAMPLES / FRAME_SAMPLES;
const frame = (n: number): Uint8Array => {
  const pcm = new Int16Array(FRAME_SAMPLES);
  for (let i = 0; i < FRAME_SAMPLES; i++) pcm[i] = n * FRAME_SAMPLES + i - 24000;
  return new Uint8Array(pcm.buffer);
};
/** One scripted word per 250 ms: the stream that heard the word's middle sample says it. */
const WORD_SAMPLES = 4000;
const WORDS = SAMPLES / WORD_SAMPLES;
const QUERY = { codec: 'pcm16', sample_rate: '16000', ack: 'enabled' };

/** A provider that answers, when finalized, each scripted word whose middle sample it received. */
function wordsOf(s: RecordingSttStream): SttSegment[] {
  const out: SttSegment[] = [];
  let at = 0;
  for (const c of s.chunks) {
    for (let i = 0; i < c.length; i++, at++) {
      const g = c[i]! + 24000;
      if (g % WORD_SAMPLES === WORD_SAMPLES / 2) out.push({ text: `w${g / WORD_SAMPLES - 0.5}`, speaker: 'SPEAKER_00', start: at / 16000, end: (at + 1) / 16000 });
    }
  }
  return out;
}

/** Every sample the engine's streams of `uid`'s connections received, stream by stream in the order they opened. */
function heard(engine: RecordingSttEngine, sessions: ReadonlySet<string>): number[] {
  const out: number[] = [];
  for (const s of engine.streams) if (sessions.has(s.options.sessionId)) for (const c of s.chunks) for (const v of c) out.push(v + 24000);
  return out;
}

/** mulberry32: a small seeded generator, so a failing run can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

async function readLog(ts: TestService, id: string): Promise<LogRecord[]> {
  const read = await readSessionLog(new LocalAudioLogStore(ts.dataDir), id);
  return read?.runs.flatMap((r) => r.records) ?? [];
}


/** The highest audio_ack the client got on this connection (a device reads every message, whatever else it waits for). */
function lastAck(c: ListenClient): number {
  let best = -1;
  for (const f of c.frames) if (f.startsWith('{"type":"audio_ack"')) best = Math.max(best, JSON.parse(f).offset_ms as number);
  return best;
}

async function ackedTo(ts: TestService, c: ListenClient, logId: string, ms: number): Promise<void> {
  await until(() => (ts.service.audioLogs!.durable.receivedMs(logId) ?? -1) >= ms, { what: `audio up to ${ms} ms received` });
  await advance(ts, 1000);
  await until(() => lastAck(c) >= ms, { what: `audio_ack ${ms}` });
}

t.test('audio_session names the session; audio_ack follows the write pass; a client without ack sees neither', async (t) => {
  const engine = new RecordingSttEngine('provider_a');
  const ts = await startService(t, { sttEngines: [engine] });
  const c = await open(ts, { uid: 'u1', ...QUERY });
  const hello = await c.json((m) => m.type === 'audio_session', 30_000); // after the connection it replaces finished
  t.match(hello, { type: 'audio_session', session_id: /^[0-9a-f-]{36}$/, offset_ms: 0 });
  await c.ready();
  for (let n = 0; n < 10; n++) c.ws.send(frame(n));
  await until(() => ts.service.audioLogs!.durable.receivedMs(hello.session_id) === 200, { what: 'ten frames logged' });
  t.notOk(c.frames.some((f) => f.includes('audio_ack')), 'nothing acknowledged before the pass');
  await advance(ts, 1000);
  t.same(await c.json((m) => m.type === 'audio_ack'), { type: 'audio_ack', offset_ms: 200 });
  t.ok(existsSync(new LocalAudioLogStore(ts.dataDir).manifestFile(hello.session_id)), 'the log is under DATA_DIR');
  c.close();
  await c.closed;

  const plain = await open(ts, { uid: 'u2', codec: 'pcm16', sample_rate: '16000' });
  await plain.ready();
  plain.ws.send(frame(0));
  await advance(ts, 1000);
  plain.close();
  await plain.closed;
  t.notOk(plain.frames.some((f) => f.includes('audio_')), 'no audio_session, no audio_ack');
});

t.test('cut at random points 100 times: the provider hears every sample once, in order, and every word is stored', async (t) => {
  const engine = new RecordingSttEngine('provider_a');
  engine.autoAnswer = wordsOf;
  const ts = await startService(t, { sttEngines: [engine] });
  const seed = Number(process.env.DURABLE_SEED ?? 49);
  const random = rng(seed);
  for (let run = 0; run < 100; run++) {
    const uid = `cut-${run}`;
    const connections = new Set<string>();
    let logId: string | undefined;
    let acked = 0;
    let sent = 0;
    for (let attempt = 0; ; attempt++) {
      const query: Record<string, string> = { uid, ...QUERY, ...(logId ? { resume: logId, offset_ms: String(acked) } : {}) };
      const c = await open(ts, query);
      const hello = await c.json((m) => m.type === 'audio_session', 30_000); // after the connection it replaces finished
      logId ??= hello.session_id as string;
      t.equal(hello.session_id, logId, 'the same session');
      await c.ready();
      connections.add(ts.service.sessions.sessionsOf(uid).find((a) => !a.clientGone)!.sessionId);
      // The client re-sends from its last ack: what the service already holds is dropped by offset.
      sent = acked / 20;
      const last = attempt >= 4 ? FRAMES : Math.min(FRAMES, sent + 1 + Math.floor(random() * FRAMES * 0.6));
      while (sent < last) {
        c.ws.send(frame(sent++));
        if (random() < 0.08) {
          await ackedTo(ts, c, logId, sent * 20);
          acked = lastAck(c);
        }
      }
      if (sent === FRAMES) {
        await ackedTo(ts, c, logId, SECONDS * 1000);
        c.close();
        await c.closed;
        break;
      }
      acked = Math.max(acked, lastAck(c));
      // Cut: sometimes at once (frames still on the wire), sometimes once the service has them all.
      if (random() < 0.5) await until(() => (ts.service.audioLogs!.durable.receivedMs(logId!) ?? 0) >= sent * 20, { what: 'frames received' });
      c.ws.terminate();
    }
    await until(() => ts.service.sessions.sessionsOf(uid).length === 0, { what: `run ${run}: sessions drained`, timeoutMs: 30_000 });
    const got = heard(engine, connections);
    const firstWrong = got.findIndex((v, i) => v !== i);
    if (got.length !== SAMPLES || firstWrong >= 0) {
      t.fail(`run ${run} (seed ${seed}): ${got.length} samples heard, first out of place at ${firstWrong}`);
      return;
    }
    // A resume that overtakes the old connection's drain may open a second conversation: the words are in the two.
    const ids = (await ts.service.services.store.knex('conversations').where({ user_id: uid }).select('id')) as { id: string }[];
    const text: string[] = [];
    for (const { id } of ids) for (const s of await ts.service.services.conversations.segments(id)) text.push(...s.text.split(' '));
    const words = Array.from({ length: WORDS }, (_, k) => `w${k}`);
    if (words.some((w) => text.filter((x) => x === w).length !== 1)) {
      t.fail(`run ${run} (seed ${seed}): transcript ${JSON.stringify(text)}`);
      return;
    }
  }
  t.pass('100 runs: every sample heard once and in order, every scripted word stored once');
  t.ok(ts.service.audioLogs!.durable.duplicates > 0, 'frames re-sent from before the durable offset were dropped');
});

t.test('resume refusals: another user\'s session and an unknown one 4404, a malformed resume 400', async (t) => {
  const ts = await startService(t, { sttEngines: [new RecordingSttEngine('provider_a')] });
  const c = await open(ts, { uid: 'owner', ...QUERY });
  const { session_id } = await c.json((m) => m.type === 'audio_session');
  await c.ready();
  c.ws.send(frame(0));
  await ackedTo(ts, c, session_id, 20);
  c.close();
  await c.closed;

  const thief = await open(ts, { uid: 'thief', ...QUERY, resume: session_id, offset_ms: '0' });
  t.same(await thief.closed, { code: 4404, reason: 'unknown session' });
  const lost = await open(ts, { uid: 'owner', ...QUERY, resume: 'no-such-session', offset_ms: '0' });
  t.same(await lost.closed, { code: 4404, reason: 'unknown session' });
  const bad = await connect(ts, { uid: 'owner', ...QUERY, resume: session_id });
  t.same([bad.status, JSON.parse(bad.status ? bad.body : "{}")], [400, { detail: 'offset_ms is required with resume' }]);
  const noAck = await connect(ts, { uid: 'owner', codec: 'pcm16', resume: session_id, offset_ms: '0' });
  t.equal(noAck.status, 400);
});

t.test('a resume past what the service received is a recorded gap; the log bound closes with 4413', async (t) => {
  const engine = new RecordingSttEngine('provider_a');
  const ts = await startService(t, { sttEngines: [engine], env: { AUDIO_LOG_MAX_SESSION_BYTES: '65536' } });
  const c = await open(ts, { uid: 'u1', ...QUERY });
  const { session_id } = await c.json((m) => m.type === 'audio_session');
  await c.ready();
  for (let n = 0; n < 5; n++) c.ws.send(frame(n));
  await ackedTo(ts, c, session_id, 100);
  c.ws.terminate();
  await until(() => ts.service.sessions.size === 0, { what: 'drained', timeoutMs: 30_000 });

  const d = await open(ts, { uid: 'u1', ...QUERY, resume: session_id, offset_ms: '500' });
  t.match(await d.json((m) => m.type === 'audio_session'), { session_id, offset_ms: 500 }, 'the service continues after the gap');
  const metrics = await ts.req('/metrics');
  t.match(metrics.text, /listen_audio_log_gap_seconds_total 0\.4\b/, 'the 400 ms never received are counted');
  await d.ready();
  // 64 KiB of log: about a hundred 640-byte frames.
  for (let n = 25; n < 200; n++) d.ws.send(frame(n % FRAMES));
  t.same(await d.closed, { code: 4413, reason: 'audio log full for this session' });
  t.match((await ts.req('/metrics')).text, /listen_audio_log_full_total\{scope="session"\} 1/);
});

t.test('retention: the log goes once its conversation is processed and the retention passed, on the injected clock', async (t) => {
  const engine = new RecordingSttEngine('provider_a');
  engine.autoAnswer = wordsOf;
  const ts = await startService(t, { sttEngines: [engine], env: { AUDIO_LOG_RETENTION_S: '600' } });
  const c = await open(ts, { uid: 'u1', ...QUERY });
  const { session_id } = await c.json((m) => m.type === 'audio_session');
  await c.ready();
  for (let n = 0; n < FRAMES; n++) c.ws.send(frame(n));
  await ackedTo(ts, c, session_id, SECONDS * 1000);
  c.close();
  await c.closed;
  await until(() => ts.service.sessions.size === 0, { what: 'drained', timeoutMs: 30_000 });
  const dir = new LocalAudioLogStore(ts.dataDir).manifestFile(session_id);
  const conversation = await waitFor(() => ts.service.services.conversations.latestWithStatus('u1', ConversationStatus.IN_PROGRESS), { what: 'conversation' });
  await advance(ts, 30_000);
  await ts.service.audioLogs!.sweep.run();
  t.ok(existsSync(dir), 'kept while the conversation is in progress');

  await ts.service.services.conversations.setStatus(conversation.id, ConversationStatus.COMPLETED, ts.clock.now());
  await advance(ts, 60_000);
  await ts.service.audioLogs!.sweep.run();
  t.ok(existsSync(dir), 'kept during the retention');
  await advance(ts, 600_000);
  await ts.service.audioLogs!.sweep.run();
  t.notOk(existsSync(dir), 'deleted once the retention passed');
  const segments = path.join(ts.dataDir, 'audio-log', 'segments');
  t.same(readdirSync(segments).filter((n) => n.endsWith('.seg')), [], 'its segment too, once no other session needs it');
  t.match((await ts.req('/metrics')).text, /listen_audio_logs_removed_total\{reason="retention"\} 1/);
});

t.test('the log goes with its conversation', async (t) => {
  const ts = await startService(t, { sttEngines: [new RecordingSttEngine('provider_a')], env: { AUDIO_LOG_RETENTION_S: '86400' } });
  const c = await open(ts, { uid: 'u1', ...QUERY });
  const { session_id } = await c.json((m) => m.type === 'audio_session');
  await c.ready();
  for (let n = 0; n < 50; n++) c.ws.send(frame(n));
  await ackedTo(ts, c, session_id, 1000);
  await advance(ts, 600);
  await advance(ts, 1000); // the pass after the first step marks the conversation in the log
  const conversation = await waitFor(() => ts.service.services.conversations.latestWithStatus('u1', ConversationStatus.IN_PROGRESS), { what: 'conversation' });
  c.close();
  await c.closed;
  await until(() => ts.service.sessions.size === 0, { what: 'drained', timeoutMs: 30_000 });
  await until(() => !ts.service.audioLogs!.durable.isOpen(session_id), { what: 'log closed' });
  const marks = (await readLog(ts, session_id)).filter((r) => r.type === RecordType.MARK).map((r) => (r as MarkRecord).mark);
  t.match(marks, [{ kind: 'start' }, { kind: 'conversation', conversationId: conversation.id }, { kind: 'end' }], 'the log names the conversation');
  await ts.service.services.store.knex('conversations').where({ id: conversation.id }).delete();
  await ts.service.audioLogs!.sweep.run();
  t.notOk(existsSync(new LocalAudioLogStore(ts.dataDir).manifestFile(session_id)), 'deleted with the conversation');
});

t.test('a session resumed on another node of the deployment continues its log there (DATA_DIR shared)', async (t) => {
  const engine = new RecordingSttEngine('provider_a');
  const a = await startService(t, { sttEngines: [engine] });
  const c = await open(a, { uid: 'u1', ...QUERY });
  const { session_id } = await c.json((m) => m.type === 'audio_session');
  await c.ready();
  for (let n = 0; n < 60; n++) c.ws.send(frame(n));
  await ackedTo(a, c, session_id, 1200);
  for (let n = 60; n < 80; n++) c.ws.send(frame(n)); // received by node a, not yet acknowledged
  await until(() => (a.service.audioLogs!.durable.receivedMs(session_id) ?? 0) >= 1600, { what: 'unacknowledged frames received' });
  c.ws.terminate();
  await until(() => a.service.sessions.size === 0, { what: 'node a drained', timeoutMs: 30_000 });
  const b = await startService(t, { sttEngines: [engine], sameDeploymentAs: a, clock: a.clock });

  const d = await open(b, { uid: 'u1', ...QUERY, resume: session_id, offset_ms: '1200' });
  t.match(await d.json((m) => m.type === 'audio_session'), { session_id, offset_ms: 1600 }, 'node b read where the log ends');
  await d.ready();
  for (let n = 60; n < FRAMES; n++) d.ws.send(frame(n));
  await ackedTo(b, d, session_id, SECONDS * 1000);
  d.close();
  await d.closed;
  await until(() => b.service.sessions.size === 0, { what: 'node b drained', timeoutMs: 30_000 });
  const all: number[] = [];
  for (const s of engine.streams) for (const ch of s.chunks) for (const v of ch) all.push(v + 24000);
  t.equal(all.length, SAMPLES, 'every sample once across both nodes');
  t.ok(all.every((v, i) => v === i), 'in order');
  t.equal(b.service.audioLogs!.durable.duplicates, 20, 'the 400 ms node a had were dropped on node b');
});
