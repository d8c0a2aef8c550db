// The actor's bounded queues without sockets: Outbox (backpressure, slow client) and AudioInlet (bytes bound, one batch in flight).
import t from 'tap';
import { EventEmitter } from 'node:events';
import { Outbox } from '../../engine/actors/outbox.js';
import { AudioInlet } from '../../engine/actors/audio-inlet.js';
import type { SendResult, SessionSocket } from '../../engine/actors/session-actor.js';
import type { CodecStream } from '../../engine/pool.js';

class FakeSocket implements SessionSocket {
  sent: string[] = [];
  ended: [number, string][] = [];
  next: SendResult[] = [];
  send(data: string | Uint8Array): SendResult {
    this.sent.push(String(data));
    return this.next.shift() ?? 'ok';
  }
  end(code: number, reason: string): void {
    this.ended.push([code, reason]);
  }
}

t.test('outbox: queues behind backpressure, drains in order, gives up on a client that does not read', async (t) => {
  const socket = new FakeSocket();
  let overflows = 0;
  const out = new Outbox(socket, 10, () => overflows++);
  socket.next = ['backpressure'];
  out.send('a');
  t.ok(out.blocked);
  out.send('bb');
  out.sendIfIdle('ping');
  out.send('ccc');
  t.same(socket.sent, ['a'], 'nothing more written while blocked; the ping is skipped, not queued');
  t.equal(out.queuedBytes, 5);
  out.drain();
  t.same(socket.sent, ['a', 'bb', 'ccc'], 'in order after drain');
  socket.next = ['backpressure'];
  out.send('x');
  out.send('0123456789ab');
  t.equal(overflows, 1, 'over the byte bound');
  socket.next = ['dropped'];
  out.drain();
  t.equal(overflows, 2, 'a dropped message is a slow client too');
  out.end(1008, 'bye');
  out.end(1008, 'again');
  t.same(socket.ended, [[1008, 'bye']], 'ended once');
  out.send('late');
  t.equal(socket.sent.at(-1), '0123456789ab', 'nothing sent after end');
});

class FakeCodec extends EventEmitter {
  pushed: Uint8Array[] = [];
  closed: boolean | undefined;
  push(m: Uint8Array): void {
    this.pushed.push(m);
  }
  async close(o: { flush?: boolean } = {}): Promise<void> {
    this.closed = o.flush ?? true;
    if (this.closed) this.emit('pcm', [new Int16Array(1)], {});
  }
}

t.test('audio inlet: waits for start, one batch in flight, byte bound, finish flushes everything', async (t) => {
  const codec = new FakeCodec();
  const out: number[] = [];
  const inlet = new AudioInlet({ codec: codec as unknown as CodecStream, maxBytes: 100, onPcm: (pcm) => out.push(pcm[0]!.length) });
  t.ok(inlet.accept(new Uint8Array(30)));
  t.equal(codec.pushed.length, 0, 'nothing decoded before start (OPENING)');
  inlet.start();
  t.equal(codec.pushed.length, 1, 'queued audio goes at start');
  t.ok(inlet.accept(new Uint8Array(30)));
  t.ok(inlet.accept(new Uint8Array(30)));
  t.equal(codec.pushed.length, 1, 'one batch in flight');
  t.equal(inlet.pendingBytes, 90);
  t.notOk(inlet.accept(new Uint8Array(30)), 'refused past the bound');
  codec.emit('pcm', [new Int16Array(160)], {});
  t.equal(codec.pushed.length, 3, 'the next batch leaves together when the first is decoded');
  t.equal(inlet.pendingBytes, 60);
  codec.emit('failure', new Error('lost'), 2);
  t.equal(inlet.pendingBytes, 0, 'a lost batch frees its bytes too');
  t.ok(inlet.accept(new Uint8Array(30)));
  t.ok(inlet.accept(new Uint8Array(30)));
  t.equal(codec.pushed.length, 4);
  await inlet.finish();
  t.equal(codec.pushed.length, 5, 'finish hands over the queued rest');
  t.equal(codec.closed, true, 'and closes with flush');
  t.same(out, [160, 1], 'PCM delivered, including the tail');
  inlet.dispose();
});
