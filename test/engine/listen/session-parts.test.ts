// The actor's bounded queues without sockets: Outbox (backpressure, slow client) and AudioInlet (bytes bound, one batch in flight).
import t from 'tap';
import { EventEmitter } from 'node:events';
import { Outbox } from '../../../engine/listen/outbox.js';
import { AudioInlet } from '../../../engine/listen/audio-inlet.js';
import type { SendResult, SessionSocket } from '../../../engine/listen/session-actor.js';
import type { CodecStream } from '../../../engine/codec/stream.js';

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
  /** Bytes the codec holds undecoded; the test moves it as a real stream would. */
  pendingBytes = 0;
  push(m: Uint8Array): void {
    this.pushed.push(m);
    this.pendingBytes += m.byteLength;
  }
  async close(o: { flush?: boolean } = {}): Promise<void> {
    this.closed = o.flush ?? true;
    if (this.closed) this.emit('pcm', [new Int16Array(1)], {});
  }
}

t.test('audio inlet: holds copies until start, byte bound over held and undecoded audio, finish flushes everything', async (t) => {
  const codec = new FakeCodec();
  const out: number[] = [];
  const inlet = new AudioInlet({ codec: codec as unknown as CodecStream, maxBytes: 100, onPcm: (pcm) => out.push(pcm[0]!.length) });
  const lent = new Uint8Array(30).fill(7);
  t.ok(inlet.accept(lent));
  lent.fill(0);
  t.equal(codec.pushed.length, 0, 'nothing decoded before start (OPENING)');
  t.equal(inlet.pendingBytes, 30);
  inlet.start();
  t.equal(codec.pushed.length, 1, 'held audio goes at start');
  t.equal(codec.pushed[0]![0], 7, 'held audio was copied: the lent buffer was reused after accept()');
  t.ok(inlet.accept(new Uint8Array(30)));
  t.ok(inlet.accept(new Uint8Array(30)));
  t.equal(codec.pushed.length, 3, 'once started, audio goes straight to the codec');
  t.equal(inlet.pendingBytes, 90);
  t.notOk(inlet.accept(new Uint8Array(30)), 'refused past the bound while the codec falls behind');
  t.equal(codec.pushed.length, 3, 'a refused message is not kept');
  codec.pendingBytes = 0;
  codec.emit('pcm', [new Int16Array(160)], {});
  t.ok(inlet.accept(new Uint8Array(30)), 'accepted again once decoded');
  await inlet.finish();
  t.equal(codec.closed, true, 'finish closes with flush');
  t.same(out, [160, 1], 'PCM delivered, including the tail');
  t.ok(inlet.accept(new Uint8Array(30)), 'audio after finish is ignored, not refused');
  t.equal(codec.pushed.length, 4);
  inlet.dispose();
});
