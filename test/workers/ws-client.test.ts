// The codec shards' provider socket client (workers/ws-client.ts) against `ws` (TCP and TLS), and against a raw TCP
// server for what a library would not send: fragments, pings, split frames, violations, refused and forged handshakes.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { WebSocketServer, type WebSocket } from 'ws';
import { WsClient, type ConnectOutcome, type WsClientHandlers } from '../../workers/ws-client.js';
import { until } from '../helpers/until.js';

interface Seen {
  texts: string[];
  closes: [number, string][];
}

function handlers(): WsClientHandlers & Seen {
  const seen: Seen = { texts: [], closes: [] };
  return Object.assign(seen, {
    text: (x: string) => void seen.texts.push(x),
    close: (code: number, reason: string) => void seen.closes.push([code, reason]),
  });
}


/** Opens a client; answers it, its handlers and the outcome. */
async function connect(url: string, o: { headers?: Record<string, string>; maxPayload?: number; ca?: string } = {}): Promise<{ c: WsClient; h: WsClientHandlers & Seen; outcome: ConnectOutcome }> {
  const h = handlers();
  let c!: WsClient;
  const outcome = await new Promise<ConnectOutcome>((resolve) => {
    c = new WsClient({ url, headers: o.headers ?? {}, maxPayload: o.maxPayload ?? 1 << 20, ...(o.ca !== undefined && { ca: o.ca }) }, resolve);
    c.listen(h);
  });
  return { c, h, outcome };
}

t.test('against ws: headers go with the upgrade, text both ways, binary unmasked intact at every length', async (t) => {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((r) => wss.once('listening', r));
  t.teardown(() => new Promise<void>((r) => wss.close(() => r())));
  const got: (string | Buffer)[] = [];
  let auth: string | undefined;
  let peer!: WebSocket;
  wss.on('connection', (ws, req) => {
    auth = req.headers.authorization;
    peer = ws;
    ws.on('message', (data, isBinary) => got.push(isBinary ? Buffer.from(data as Buffer) : data.toString()));
  });
  const port = (wss.address() as net.AddressInfo).port;
  const { c, h, outcome } = await connect(`ws://127.0.0.1:${port}/v1/listen?model=nova-3`, { headers: { Authorization: 'Token k' } });
  t.same(outcome, { ok: true });
  t.equal(auth, 'Token k');
  t.ok(c.open);
  // 125 and 126 bytes straddle the 7-bit length; 70,001 needs the 64-bit one; odd lengths end off a word.
  const sizes = [0, 1, 125, 126, 3200, 3201, 65535, 65536, 70001];
  const payloads = sizes.map((n) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + n) & 0xff));
  for (const p of payloads) {
    // In two chunks, as a rest and a batch go.
    const cut = p.length >> 1;
    c.sendBinary([p.subarray(0, cut), p.subarray(cut)]);
  }
  c.sendText('{"type":"KeepAlive"}');
  c.sendText('héllo ✓');
  await until(() => got.length === payloads.length + 2, { what: 'every message' });
  for (let i = 0; i < payloads.length; i++) t.same(got[i], Buffer.from(payloads[i]!), `${sizes[i]} bytes`);
  t.same(got.slice(-2), ['{"type":"KeepAlive"}', 'héllo ✓']);
  // PCM as the shard sends it: Int16Array views, read not changed.
  const pcm = Int16Array.from({ length: 1600 }, (_, i) => i - 800);
  const before = pcm.slice();
  c.sendBinary([pcm.subarray(0, 100), pcm.subarray(100)]);
  await until(() => got.length === payloads.length + 3, { what: 'the PCM' });
  t.same(new Int16Array(new Uint8Array(got.at(-1) as Buffer).buffer), pcm);
  t.same(pcm, before, 'the caller’s samples are left as they were');
  peer.send('{"is_final":true}');
  peer.send('ünïcode ✓');
  await until(() => h.texts.length === 2, { what: 'the server’s text' });
  t.same(h.texts, ['{"is_final":true}', 'ünïcode ✓']);
  peer.close(4000, 'bye');
  await until(() => h.closes.length === 1, { what: 'the close' });
  t.same(h.closes, [[4000, 'bye']]);
  t.notOk(c.open);
});

t.test('close(code) sends a close frame with that code and calls no handler', async (t) => {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((r) => wss.once('listening', r));
  t.teardown(() => new Promise<void>((r) => wss.close(() => r())));
  let closed: [number, string] | undefined;
  let tcpClosed = false;
  wss.on('connection', (ws, req) => {
    ws.on('close', (code, reason) => (closed = [code, reason.toString()]));
    req.socket.on('close', () => (tcpClosed = true));
  });
  const { c, h } = await connect(`ws://127.0.0.1:${(wss.address() as net.AddressInfo).port}/`);
  c.close(1000);
  await until(() => closed !== undefined, { what: 'the server to see the close' });
  t.same(closed, [1000, '']);
  // The server's end of the connection closes only after the client's socket has, so its handlers had their chance.
  await until(() => tcpClosed, { what: 'the connection to close' });
  t.same(h.closes, []);
});

t.test('wss: the same over TLS', async (t) => {
  const dir = t.testdir();
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], { stdio: 'ignore' });
  const server = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) });
  const wss = new WebSocketServer({ server });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  wss.on('connection', (ws) => ws.on('message', (data, isBinary) => ws.send(isBinary ? `${(data as Buffer).length} bytes` : `echo ${data.toString()}`)));
  const port = (server.address() as net.AddressInfo).port;
  const untrusted = await connect(`wss://localhost:${port}/`);
  t.match(untrusted.outcome, { ok: false, why: /socket error/ }, 'a certificate not trusted is refused');
  const { c, h, outcome } = await connect(`wss://localhost:${port}/`, { ca: readFileSync(cert, 'utf8') });
  t.same(outcome, { ok: true });
  c.sendBinary([new Uint8Array(3200)]);
  c.sendText('hi');
  await until(() => h.texts.length === 2, { what: 'the echoes' });
  t.same(h.texts, ['3200 bytes', 'echo hi']);
  for (const s of wss.clients) s.close(1000);
  await until(() => h.closes.length === 1, { what: 'the close' });
  t.same(h.closes, [[1000, '']]);
});

/** A raw TCP server: answers the upgrade as `answer` says, then hands the socket and what the client sent to `then`. */
async function rawServer(
  t: Test,
  then: (socket: net.Socket, frames: () => Frame[]) => void,
  answer: (key: string) => string = accepted,
): Promise<string> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    let head = '';
    let rest: Buffer = Buffer.alloc(0);
    let upgraded = false;
    const frames: Frame[] = [];
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      if (!upgraded) {
        head += chunk.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        upgraded = true;
        const key = /sec-websocket-key: (.*)\r\n/i.exec(head)![1]!;
        socket.write(Buffer.from(answer(key), 'latin1'));
        then(socket, () => frames);
        return;
      }
      rest = Buffer.concat([rest, chunk]);
      rest = readFrames(rest, frames);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return `ws://127.0.0.1:${(server.address() as net.AddressInfo).port}/`;
}

function accepted(key: string): string {
  const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  return `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`;
}

interface Frame {
  opcode: number;
  masked: boolean;
  payload: Buffer;
}

/** Reads the client's (masked) frames off `buf`; answers what is left. */
function readFrames(buf: Buffer, out: Frame[]): Buffer {
  for (;;) {
    if (buf.length < 2) return buf;
    const masked = (buf[1]! & 0x80) !== 0;
    let len = buf[1]! & 0x7f;
    let at = 2;
    if (len === 126) {
      if (buf.length < 4) return buf;
      len = buf.readUInt16BE(2);
      at = 4;
    } else if (len === 127) {
      if (buf.length < 10) return buf;
      len = Number(buf.readBigUInt64BE(2));
      at = 10;
    }
    const need = at + (masked ? 4 : 0) + len;
    if (buf.length < need) return buf;
    const payload = Buffer.from(buf.subarray(need - len, need));
    if (masked) for (let i = 0; i < len; i++) payload[i]! ^= buf[at + (i & 3)]!;
    out.push({ opcode: buf[0]! & 0x0f, masked, payload });
    buf = buf.subarray(need);
  }
}

/** A server frame (unmasked unless `mask`). */
function frame(opcode: number, payload: Buffer | string, o: { fin?: boolean; mask?: boolean; rsv?: number } = {}): Buffer {
  const p = Buffer.from(payload);
  const head = p.length < 126 ? Buffer.from([0, p.length]) : Buffer.from([0, 126, p.length >> 8, p.length & 0xff]);
  head[0] = ((o.fin ?? true) ? 0x80 : 0) | (o.rsv ?? 0) | opcode;
  if (o.mask) {
    head[1]! |= 0x80;
    return Buffer.concat([head, Buffer.alloc(4), p]);
  }
  return Buffer.concat([head, p]);
}

function closePayload(code: number, reason = ''): Buffer {
  const b = Buffer.alloc(2 + Buffer.byteLength(reason));
  b.writeUInt16BE(code, 0);
  b.write(reason, 2);
  return b;
}

t.test('fragments make one message; a ping between them is answered with its payload; frames split byte by byte', async (t) => {
  let frames!: () => Frame[];
  const url = await rawServer(t, (socket, f) => {
    frames = f;
    const bytes = Buffer.concat([
      frame(0x1, '{"a":', { fin: false }),
      frame(0x9, 'ping!'),
      frame(0x0, '"b"', { fin: false }),
      frame(0x0, '}'),
      frame(0x2, Buffer.from([1, 2, 3])),
      frame(0x1, 'x'.repeat(300)),
    ]);
    // Some bytes at a time: a frame arrives over several reads.
    let at = 0;
    const step = (): void => {
      if (at >= bytes.length) return;
      socket.write(bytes.subarray(at, at + 3));
      at += 3;
      setTimeout(step, 1);
    };
    step();
  });
  const { h } = await connect(url);
  await until(() => h.texts.length === 2, { what: 'the texts' });
  t.same(h.texts, ['{"a":"b"}', 'x'.repeat(300)], 'the binary message is dropped, the texts are whole');
  await until(() => frames().length === 1, { what: 'the pong' });
  t.same(frames().map((f) => [f.opcode, f.masked, f.payload.toString()]), [[0xa, true, 'ping!']]);
});

t.test('the handshake answer and the first frames in one read: the frames come after the open', async (t) => {
  const url = await rawServer(t, () => {}, (key) => accepted(key) + frame(0x1, 'first').toString('latin1'));
  const h = handlers();
  const order: string[] = [];
  await new Promise<void>((resolve) => {
    const c = new WsClient({ url, headers: {}, maxPayload: 1024 }, (o) => {
      order.push(`open ${o.ok}`);
      resolve();
    });
    c.listen({ text: (x) => void order.push(x), close: h.close });
  });
  await until(() => order.length === 2, { what: 'the text' });
  t.same(order, ['open true', 'first']);
});

for (const [name, bytes, code, why] of [
  ['invalid UTF-8', frame(0x1, Buffer.from([0xc3, 0x28])), 1007, /UTF-8/],
  ['a message over maxPayload', frame(0x1, 'y'.repeat(2000)), 1009, /too big/],
  ['a masked frame', frame(0x1, 'z', { mask: true }), 1002, /masked/],
  ['RSV bits', frame(0x1, 'z', { rsv: 0x40 }), 1002, /RSV/],
  ['an unknown opcode', frame(0x3, 'z'), 1002, /opcode/],
  ['a continuation with no message', frame(0x0, 'z'), 1002, /continuation/],
  ['a close code not allowed on the wire', frame(0x8, closePayload(1006)), 1002, /close code/],
] as const) {
  t.test(`${name}: the client closes with ${code} and reports a dropped connection`, async (t) => {
    let frames!: () => Frame[];
    const url = await rawServer(t, (socket, f) => {
      frames = f;
      socket.write(bytes);
    });
    const { h } = await connect(url, { maxPayload: 1024 });
    await until(() => h.closes.length === 1, { what: 'the close' });
    t.equal(h.closes[0]![0], 1006);
    t.match(h.closes[0]![1], why);
    await until(() => frames().length === 1, { what: 'the close frame' });
    t.equal(frames()[0]!.opcode, 0x8);
    t.equal(frames()[0]!.payload.readUInt16BE(0), code);
  });
}

t.test('a close frame from the provider: its code and reason, answered with the same code', async (t) => {
  let frames!: () => Frame[];
  const url = await rawServer(t, (socket, f) => {
    frames = f;
    socket.write(frame(0x8, closePayload(1011, 'internal')));
  });
  const { h } = await connect(url);
  await until(() => h.closes.length === 1 && frames().length === 1, { what: 'the exchange' });
  t.same(h.closes, [[1011, 'internal']]);
  t.equal(frames()[0]!.payload.readUInt16BE(0), 1011);
});

t.test('a connection dropped without a close frame is 1006', async (t) => {
  const url = await rawServer(t, (socket) => setTimeout(() => socket.destroy(), 5));
  const { h } = await connect(url);
  await until(() => h.closes.length === 1, { what: 'the close' });
  t.same(h.closes, [[1006, '']]);
});

t.test('refused and forged handshakes', async (t) => {
  const refused = await rawServer(t, (s) => s.end(), () => 'HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\ndg-request-id: req-1\r\nContent-Length: 0\r\n\r\n');
  t.same((await connect(refused)).outcome, { ok: false, status: 429, retryAfter: '7', requestId: 'req-1', why: 'handshake refused with 429' });
  const forged = await rawServer(t, () => {}, () => accepted('not the key'));
  t.match((await connect(forged)).outcome, { ok: false, why: /Sec-WebSocket-Accept/ });
  const withExtension = await rawServer(t, () => {}, (key) => accepted(key).replace('\r\n\r\n', '\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n'));
  t.match((await connect(withExtension)).outcome, { ok: false, why: /extension/ });
  const notHttp = await rawServer(t, () => {}, () => 'hello\r\n\r\n');
  t.match((await connect(notHttp)).outcome, { ok: false, why: /not an HTTP answer/ });
  const hangsUp = await rawServer(t, (s) => s.destroy(), () => 'HTTP/1.1 101 Switching');
  t.match((await connect(hangsUp)).outcome, { ok: false, why: /closed during the handshake/ });
  const free = net.createServer();
  await new Promise<void>((r) => free.listen(0, '127.0.0.1', r));
  const port = (free.address() as net.AddressInfo).port;
  await new Promise<void>((r) => free.close(() => r()));
  t.same((await connect(`ws://127.0.0.1:${port}/`)).outcome, { ok: false, why: 'socket error ECONNREFUSED' });
  t.match((await connect(refused, { headers: { 'X-Bad': 'a\r\nInjected: 1' } })).outcome, { ok: false, why: /invalid header/ });
});

t.test('terminate() before the upgrade settles the attempt as failed, and nothing follows', async (t) => {
  let accepted = 0;
  let hungUp = 0;
  const server = net.createServer((socket) => {
    accepted++;
    socket.on('error', () => {});
    socket.on('close', () => hungUp++);
    socket.resume();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const url = `ws://127.0.0.1:${(server.address() as net.AddressInfo).port}/`;
  const outcomes: ConnectOutcome[] = [];
  const c = new WsClient({ url, headers: {}, maxPayload: 1024 }, (o) => void outcomes.push(o));
  const h = handlers();
  c.listen(h);
  await until(() => accepted === 1, { what: 'the connection' });
  c.terminate();
  // The server sees the hang-up only after the client's socket closed and its events ran.
  await until(() => hungUp === 1, { what: 'the hang-up' });
  t.same(outcomes, [{ ok: false, why: 'terminated' }]);
  t.same(h.closes, []);
});
