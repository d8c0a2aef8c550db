// image_chunk over the live socket: reassembly out of order into a stored photo, rejected chunks, the pending limit, TTL.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { startService, type TestService } from '../../helpers/service.js';
import { advance, open, type ListenClient } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import type { SessionActor } from '../../../engine/listen/session-actor.js';
import { sniffImageType } from '../../../engine/db/conversations.js';

const chunk = (id: string, index: number, total: number, data: string): string => JSON.stringify({ type: 'image_chunk', id, index, total, data });

async function sendAll(c: ListenClient, actor: SessionActor, frames: string[]): Promise<void> {
  const before = actor.stats.textMessages;
  for (const f of frames) c.ws.send(f);
  await until(() => actor.stats.textMessages >= before + frames.length, { what: 'frames received' });
}

function png(size: number): Buffer {
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(size - 8)]);
}

async function session(t: Test): Promise<{ ts: TestService; c: ListenClient; actor: SessionActor }> {
  const ts = await startService(t);
  const c = await open(ts, { uid: 'u1', conversation_timeout: '120' });
  await c.ready();
  return { ts, c, actor: ts.service.sessions.sessionsOf('u1')[0]! };
}

t.test('chunks out of order complete an image stored on the conversation; a bad chunk is ignored', async (t) => {
  const { ts, c, actor } = await session(t);
  const image = png(3000);
  const parts = [image.subarray(0, 1000), image.subarray(1000, 2000), image.subarray(2000)].map((b) => b.toString('base64'));
  await sendAll(c, actor, [chunk('img-1', 2, 3, parts[2]!), chunk('img-1', 0, 3, parts[0]!), chunk('img-1', 1, 3, '!!not base64!!'), chunk('img-1', 0, 3, parts[0]!)]);
  t.equal(actor.stats.rejectedImageChunks, 1, 'the bad base64 chunk is rejected');
  t.equal(actor.stats.imagesCompleted, 0, 'still pending');
  await sendAll(c, actor, [chunk('img-1', 1, 3, parts[1]!)]);
  t.equal(actor.stats.imagesCompleted, 1);
  await advance(ts, 600);
  const id = actor.conversationId;
  t.ok(id, 'the photo opened a conversation');
  const photos = await ts.service.services.conversations.photos(id!);
  t.equal(photos.length, 1);
  t.match(photos[0], { conversationId: id, contentType: 'image/png', size: 3000 });
  t.ok(photos[0]!.bytes.equals(image), 'bytes reassembled in index order');
  t.equal(sniffImageType(Buffer.from([0xff, 0xd8, 0xff, 0xe0])), 'image/jpeg');
  t.equal(sniffImageType(Buffer.from('RIFF\0\0\0\0WEBPVP8 ')), 'image/webp');
  t.equal(sniffImageType(Buffer.from('GIF89a')), 'application/octet-stream');

  // The session goes on: another image lands next to the first.
  await sendAll(c, actor, [chunk('img-2', 0, 1, Buffer.from([0xff, 0xd8, 0xff, 1, 2, 3]).toString('base64'))]);
  await advance(ts, 600);
  t.same((await ts.service.services.conversations.photos(id!)).map((p) => p.contentType), ['image/png', 'image/jpeg']);
  t.equal(actor.state, 'ready', 'the session is still up');

  // A conversation whose only content is photos is processed, not deleted as empty.
  // Silence for the conversation timeout while the device stays connected: a keep-alive half-way keeps the
  // 90 s inactivity close (which would otherwise race the timeout in the same tick) out of the picture.
  await advance(ts, 60_000);
  const keepAlives = actor.stats.keepAlives;
  c.ws.send(Buffer.from([0x8a, 0x00]));
  await until(() => actor.stats.keepAlives > keepAlives, { what: 'keep-alive received' });
  await advance(ts, 60_000);
  const started = await c.json((m) => m.type === 'memory_processing_started');
  t.equal(started.memory.id, id);
  t.ok(await ts.service.services.conversations.getById(id!), 'not deleted');
  t.equal(await ts.service.services.conversations.photoCount(id!), 2);
  c.close();
  await until(() => ts.service.sessions.size === 0, { what: 'session closed' });
});

t.test('the 51st pending image is refused; incomplete images expire after 60 s', async (t) => {
  const { ts, c, actor } = await session(t);
  const data = Buffer.from('part').toString('base64');
  await sendAll(c, actor, Array.from({ length: 50 }, (_, i) => chunk(`p${i}`, 0, 2, data)));
  t.equal(actor.stats.rejectedImageChunks, 0);
  await sendAll(c, actor, [chunk('p50', 0, 2, data)]);
  t.equal(actor.stats.rejectedImageChunks, 1, 'the 51st pending image is refused');
  // Completing one frees a slot.
  await sendAll(c, actor, [chunk('p0', 1, 2, data), chunk('p50', 0, 2, data)]);
  t.equal(actor.stats.imagesCompleted, 1);
  t.equal(actor.stats.rejectedImageChunks, 1, 'accepted once a slot is free');

  await advance(ts, 59_000);
  t.equal(actor.stats.imagesExpired, 0, 'nothing expires before the TTL');
  await advance(ts, 1_000);
  t.equal(actor.stats.imagesExpired, 50, 'swept on the heartbeat after 60 s');
  // A late chunk of an expired image starts it afresh: it does not complete.
  await sendAll(c, actor, [chunk('p1', 1, 2, data)]);
  t.equal(actor.stats.imagesCompleted, 1);
  t.equal(actor.stats.rejectedImageChunks, 1);
  c.close();
  await until(() => ts.service.sessions.size === 0, { what: 'session closed' });
});
