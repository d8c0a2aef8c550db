// `npm run listen` end to end: the compiled script, in a child process, streams espeak-ng speech encoded as a device
// would to the real service and its default offline engine, prints the transcript and ends the conversation.
import t from 'tap';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { speak } from '../helpers/speech.js';
import { writeWav } from '../helpers/codec-fixtures.js';

const LISTEN = fileURLToPath(new URL('../../scripts/listen.js', import.meta.url));
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

function listen(env: Record<string, string>, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [LISTEN, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 90_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

const ts = await startService(t);
// The script is a device in real time, signing its token on the wall clock: the service's clock follows it.
const drive = setInterval(() => {
  ts.clock.set(Math.max(ts.clock.now(), Date.now()));
  void ts.service.scheduler.tick();
}, 50);
t.teardown(() => clearInterval(drive));

// Not t.testdir(): it would empty the service's data directory, its signing key with it.
const dir = path.join(ts.dataDir, 'audio');
mkdirSync(dir);
const speech = speak(dir, 'the weather is nice today');
const wav = writeWav(dir, 'phrase', speech, 16000);
const seconds = (speech.length / 16000).toFixed(1);

// Two devices at once (one user each), as they would be; the file's time is mostly the offline engine's and the waits.
t.jobs = 2;
for (const codec of ['opus', 'pcm16']) {
  t.test(`${codec}: status lines, transcript segments and a summary naming the processed conversation`, async (t) => {
    const uid = `listener-${codec}`;
    const r = await listen({ DATA_DIR: ts.dataDir }, [wav, '--codec', codec, '--uid', uid, '--url', `ws://127.0.0.1:${ts.service.port}`, '--fast', '--wait', '50']);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stderr, '');
    const lines = r.stdout.trimEnd().split('\n');
    t.same(lines.slice(0, 4), ['status initiating', 'status in_progress_conversations_processing', 'status stt_initiating', 'status ready (local)']);
    const segments = lines.filter((l) => /^[ ~] +\d+\.\d–\d+\.\d +SPEAKER_\d\d/.test(l));
    t.ok(segments.length > 0, `transcript lines: ${r.stdout}`);
    const summary = new RegExp(`^summary: (\\d+) words? in \\d+ segments? from ${seconds} s of ${codec} \\(fast\\), first words \\d+\\.\\d s after the audio started, conversation (${UUID})$`).exec(lines.at(-1)!);
    t.ok(summary, lines.at(-1) ?? '');
    t.ok(Number(summary![1]) > 0, 'words heard');
    const id = summary![2]!;
    t.match(r.stdout, new RegExp(`^conversation ${id} processing$`, 'm'), 'ended as a device\'s stop does');
    t.match(r.stdout, new RegExp(`^conversation ${id} (processed|discarded)`, 'm'), 'and processed');

    // What was printed is the stored transcript.
    const res = await ts.req(`/v1/dev/user/conversations/${id}?include_transcript=true`, { headers: bearer(await ts.token(uid)) });
    t.equal(res.status, 200);
    const printed = segments.map((l) => l.replace(/^[ ~] +\S+ +SPEAKER_\d\d(?: \(you\))?  /, ''));
    t.same(res.json.transcript_segments.map((s: { text: string }) => s.text), printed);
  });
}

t.test('bad arguments print the usage and exit 2; a refused upgrade exits 1 with the status', async (t) => {
  for (const args of [[], ['a.wav', '--codec', 'mp3']]) {
    const r = await listen({ DATA_DIR: ts.dataDir }, args);
    t.equal(r.code, 2, args.join(' ') || '(none)');
    t.not(r.stderr, '');
    t.equal(r.stdout, '');
  }
  const missing = await listen({ DATA_DIR: ts.dataDir }, [path.join(dir, 'missing.wav')]);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /^ffmpeg: .*missing\.wav/);
  const refused = await listen({ DATA_DIR: ts.dataDir }, [wav, '--url', `ws://127.0.0.1:${ts.service.port}`, '--token', 'not-a-token']);
  t.equal(refused.code, 1);
  t.match(refused.stderr, /^refused: HTTP 401 \{"detail":/);
});
