// DATA_DIR on a 4 MiB tmpfs that fills up (mounted by the test, which runs as root): developer writes answer 503
// ENG_ERR_DEPENDENCY_UNAVAILABLE, live transcript steps fail visibly and keep their segments, an acknowledged-audio
// session closes 1011 "audio log write failed"; once space is freed everything that waited is stored, the service
// writes again and the sqlite file passes PRAGMA integrity_check.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, openSync, writeSync, closeSync, rmSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sqlite3 from 'sqlite3';
import { startService, type TestService } from '../../helpers/service.js';
import { advance, open, sendText, suggestedLine } from '../../helpers/listen.js';
import { bearer } from '../../helpers/http.js';
import { until } from '../../helpers/until.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';

const counter = async (ts: TestService, name: string): Promise<number> => Number(new RegExp(`^${name} (\\S+)`, 'm').exec((await ts.req('/metrics')).text)?.[1]);

/** Writes zeros into `file` until the file system refuses (ENOSPC); answers the bytes written. */
function fill(file: string): number {
  const fd = openSync(file, 'w');
  const block = Buffer.alloc(16 * 1024);
  let n = 0;
  try {
    for (;;) n += writeSync(fd, block);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
  return n;
}

function sqlite(file: string, sql: string): Promise<any[]> {
  return new Promise((resolve, reject) => {
    const db = new sqlite3.Database(file);
    db.all(sql, (err, rows) => db.close(() => (err ? reject(err) : resolve(rows))));
  });
}

t.test('a full DATA_DIR: clear refusals, nothing lost, an intact store once space is back', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'disk-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir]);
  } catch {
    t.comment('mounting a tmpfs is not permitted here: nothing to check');
    rmdirSync(dir);
    return;
  }
  // Lazy: detaches even while the stopping service still holds files there.
  t.teardown(() => {
    execFileSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  });
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { sttEngines: [engine], env: { DATA_DIR: dir, SQLITE_BUSY_TIMEOUT_MS: '200' } });
  const key = await ts.devKey('u1', ['memories:read', 'memories:write']);
  const headers = bearer(key);
  const db = path.join(dir, 'service.sqlite');
  const memory = (content: string) => ts.req('/v1/dev/user/memories', { method: 'POST', headers, body: { content } });
  const first = await memory('Written before the disk filled.');
  t.equal(first.status, 200, first.text);

  const live = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await live.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  await sendText(live, actor, suggestedLine('Stored before the disk filled.', 0));
  await advance(ts, 600);
  await until(() => actor.conversationId !== undefined, { what: 'the conversation' });
  const acked = await open(ts, { uid: 'u2', codec: 'pcm16', sample_rate: '16000', ack: 'enabled' });
  await acked.ready();
  acked.ws.send(Buffer.alloc(3200, 1));
  await until(() => ts.service.sessions.sessionsOf('u2')[0]!.stats.audioMessages === 1, { what: 'the first frame taken' });
  await advance(ts, 1000); // the audio log's write pass
  await acked.json((m) => m.type === 'audio_ack', 10_000);

  // Every page sqlite may still write into goes first: the next write has to grow a file.
  await sqlite(db, 'PRAGMA wal_checkpoint(TRUNCATE)');
  const filler = path.join(dir, 'filler');
  t.ok(fill(filler) > 0, 'the file system is full');

  const refused = await memory('Written while the disk is full.');
  t.equal(refused.status, 503, 'a developer write is refused with 503');
  t.equal(refused.headers['x-error-code'], 'ENG_ERR_DEPENDENCY_UNAVAILABLE');
  t.match(refused.json, { detail: /the store/ });

  const failuresBefore = await counter(ts, 'listen_transcript_write_failures_total');
  await sendText(live, actor, suggestedLine('Said while the disk is full.', 2));
  await advance(ts, 600);
  await until(async () => (await counter(ts, 'listen_transcript_write_failures_total')) > failuresBefore, { what: 'the failed step counted', timeoutMs: 20_000 });
  t.equal(live.ws.readyState, live.ws.OPEN, 'the live session stays open');

  acked.ws.send(Buffer.alloc(3200, 2));
  await until(() => ts.service.sessions.sessionsOf('u2')[0]!.stats.audioMessages === 2, { what: 'the second frame taken' });
  await advance(ts, 1000);
  const closed = await Promise.race([acked.closed, new Promise((r) => setTimeout(() => r('still open'), 20_000))]);
  t.same(closed, { code: 1011, reason: 'audio log write failed' }, 'the acknowledged-audio session closes 1011');
  const acks = acked.frames.filter((f) => f.startsWith('{"type":"audio_ack"')).map((f) => JSON.parse(f).offset_ms as number);
  t.equal(Math.max(...acks), 100, 'only the frame written before the disk filled was acknowledged');

  const freedAt = Date.now();
  rmSync(filler);
  await until(async () => {
    await advance(ts, 600);
    const segs = await ts.service.services.conversations.segments(actor.conversationId!);
    return segs.map((s) => s.text).join(' ') === 'Stored before the disk filled. Said while the disk is full.';
  }, { what: 'the waiting segment stored', timeoutMs: 20_000, everyMs: 50 });
  t.comment(`the waiting segment was stored ${Date.now() - freedAt} ms after space was freed`);
  t.equal(await counter(ts, 'listen_transcript_items_lost_total'), 0, 'nothing given up');
  t.equal((await memory('Written after space came back.')).status, 200, 'developer writes work again');
  const listed = await ts.req('/v1/dev/user/memories', { headers });
  t.same(listed.json.map((m: { content: string }) => m.content).sort(), ['Written after space came back.', 'Written before the disk filled.'], 'the refused write left nothing behind');
  live.close();
  await live.closed;
  t.same(await sqlite(db, 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }], 'the sqlite file is intact');
});
