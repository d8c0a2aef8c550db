// Messages over the 64 KiB limit: an audio frame is skipped and the session goes on, a text message closes 1009 with a
// reason, a frame too big to read drops the connection; each is counted in listen_oversized_messages_total.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { pcmMessages, sine } from '../../helpers/codec-fixtures.js';

const engine = new RecordingSttEngine();
const ts = await startService(t, { sttEngines: [engine] });

const oversized = async (kind: string, outcome: string): Promise<number> => {
  const text = (await ts.req('/metrics')).text;
  const m = new RegExp(`^listen_oversized_messages_total\\{kind="${kind}",outcome="${outcome}"\\} (\\d+)`, 'm').exec(text);
  return Number(m?.[1] ?? 0);
};

t.test('an audio frame over 64 KiB is skipped: the session stays open and later audio is transcribed', async (t) => {
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;

  // 70,000 bytes of valid PCM: a device that batched too much into one frame.
  c.ws.send(new Uint8Array(70_000).fill(1));
  await until(async () => (await oversized('binary', 'skipped')) === 1, { what: 'the oversized frame counted' });

  const pcm = sine(440, 16000, 1, 8000);
  const messages = pcmMessages(pcm, 1600);
  for (const m of messages) c.ws.send(m);
  const stream = engine.streams.at(-1)!;
  await until(() => stream.samples >= pcm.length, { what: 'the later audio at the engine' });
  t.equal(stream.samples, pcm.length, 'only the frames within the limit reached the engine');
  t.equal(actor.stats.audioMessages, messages.length, 'the oversized frame is not counted as audio');

  stream.emit([{ text: 'Still here.', speaker: 'SPEAKER_00', start: 0.1, end: 0.9 }]);
  await advance(ts, 600);
  const segments = await c.json((m) => Array.isArray(m));
  t.equal(segments[0].text, 'Still here.', 'the session still transcribes');
  t.equal(actor.state, 'streaming');
  c.close();
  t.same(await c.closed, { code: 1000, reason: '' });
});

t.test('a text message over 64 KiB closes with 1009 and a reason', async (t) => {
  const c = await open(ts, { uid: 'u2', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  const message = JSON.stringify({ type: 'image_chunk', id: 'p1', index: 0, total: 1, data: 'A'.repeat(70_000) });
  c.ws.send(message);
  t.same(await c.closed, { code: 1009, reason: `message too big: ${message.length} bytes, at most 65536` });
  t.equal(await oversized('text', 'closed'), 1);
  await until(() => ts.service.sessions.sessionsOf('u2').length === 0, { what: 'the session ended' });
});

t.test('a frame beyond what the server reads drops the connection before it is buffered, and is counted', async (t) => {
  const c = await open(ts, { uid: 'u3', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  c.ws.on('error', () => undefined); // the rest of the 10 MB meets a closed socket
  c.ws.send(new Uint8Array(10 * 1024 * 1024));
  t.equal((await c.closed).code, 1006, 'no close frame: the server refused the frame from its header');
  await until(async () => (await oversized('unknown', 'dropped')) === 1, { what: 'the dropped frame counted' });
  await until(() => ts.service.sessions.sessionsOf('u3').length === 0, { what: 'the session ended' });
});
