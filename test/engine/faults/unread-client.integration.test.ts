// A client that never reads what the server sends: the kernel's buffers fill, then uWS's (1 MiB), then the session's
// own queue (4 MiB); past that the session closes 1008 "client does not read its messages". What the node holds for
// the client is bounded whatever the client does; the transcript the client sent is stored.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { advance, open, sendText } from '../../helpers/listen.js';

t.test('a client that stops reading is closed 1008 once its backlog passes the bound; nothing it sent is lost', async (t) => {
  const ts = await startService(t);
  const c = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  // The client stops reading its socket: what the server sends piles up in the kernel, then in the server.
  c.ws.pause();
  const heapBefore = process.memoryUsage().heapUsed;
  // Each step echoes ~60 KB of segments; the client sends them as suggested transcripts (its sending side still works).
  const text = 'word '.repeat(2000).trim();
  let sentChars = 0;
  let steps = 0;
  for (; steps < 600 && actor.state !== 'closed'; steps++) {
    const segments = Array.from({ length: 5 }, (_, i) => ({ text: `${steps}.${i} ${text}`, speaker: 'SPEAKER_00', speaker_id: 0, is_user: true, person_id: null, start: steps * 10 + i, end: steps * 10 + i + 1 }));
    await sendText(c, actor, JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments }));
    await advance(ts, 600);
    sentChars += 5 * text.length;
  }
  t.equal(actor.state, 'closed', `closed after ${steps} steps, about ${Math.round(sentChars / 1048576)} MiB of segments sent to a client that read none`);
  t.ok(sentChars < 32 * 1048576, 'long before the client could make the node hold tens of MiB');
  const heapAfter = process.memoryUsage().heapUsed;
  t.comment(`heap grew by ${Math.round((heapAfter - heapBefore) / 1048576)} MiB while ${Math.round(sentChars / 1048576)} MiB were sent`);
  // The client reads again: behind what was buffered it finds the close.
  c.ws.resume();
  t.same(await c.closed, { code: 1008, reason: 'client does not read its messages' });
  const stored = await ts.service.services.conversations.segments(actor.conversationId!);
  t.equal(stored.length > 0 ? stored.at(-1)!.text.startsWith(`${steps - 1}.`) : false, true, 'the last lines sent before the close are stored');
  t.equal((await ts.req('/health')).status, 200, 'the node is up');
});
