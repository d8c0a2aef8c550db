// A lean RFC 6455 client for the provider sockets a codec shard holds (workers/uplink.ts): one per streaming session,
// so what each costs in memory and per message matters more than features.
import { createHash, randomFillSync, randomBytes } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';

/** How a connection attempt went: open, or why not (`status` when the provider answered the upgrade with an HTTP error). */
export type ConnectOutcome = { ok: true } | { ok: false; status?: number; retryAfter?: string | undefined; requestId?: string | undefined; why: string };

export interface ConnectOptions {
  url: string;
  headers: Record<string, string>;
  /** Longest message taken from the provider, in bytes. */
  maxPayload: number;
}

export interface WsClientHandlers {
  /** One whole text message. */
  text(text: string): void;
  /**
   * The connection ended after it opened: the provider's close code and reason, or 1006 (and what went wrong) when it
   * dropped or broke the protocol without a close frame. Called at most once.
   */
  close(code: number, reason: string): void;
}

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** Longest handshake answer read, in bytes. */
const MAX_HEAD_BYTES = 16 * 1024;
/** How long a close frame sent waits for the provider's before the socket is dropped. */
const CLOSE_WAIT_MS = 5000;
/** The write buffer kept for reuse grows up to this; a larger frame gets a buffer of its own. */
const MAX_KEPT_WRITE_BYTES = 64 * 1024;

const OP_CONT = 0x0;
const OP_TEXT = 0x1;
const OP_BINARY = 0x2;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
const OP_PONG = 0xa;

/** Per thread: what plain-TCP sockets read into, the frame being written, and random bytes for masking keys. */
const readBuffer = Buffer.allocUnsafe(64 * 1024);
let writeBuffer = Buffer.allocUnsafe(4096);
const randomPool = Buffer.allocUnsafe(4096);
let randomAt = randomPool.length;
const utf8 = new TextDecoder('utf-8', { fatal: true });
/** A masking key's bytes, and the same as one word in this machine's byte order. */
const keyBytes = new Uint8Array(4);
const keyWord = new Uint32Array(keyBytes.buffer);

class ProtocolError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** Close codes a peer may send (RFC 6455 7.4, and the IANA registry's 1012-1014). */
function validCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999);
}

/** The answer's status and headers (names lower-cased; a repeated header keeps its first value). */
function parseHead(head: string): { status: number; headers: Map<string, string> } | undefined {
  const lines = head.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(lines[0] ?? '');
  if (m === null) return undefined;
  const headers = new Map<string, string>();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(name)) headers.set(name, line.slice(colon + 1).trim());
  }
  return { status: Number(m[1]), headers };
}

/**
 * One connection. No extensions, no subprotocols, no redirects; text answers come up, binary ones are read and dropped
 * (no provider sends any the engine uses). A general client copies every audio message into a fresh buffer while
 * masking it and allocates a buffer for every read; here a frame is built and masked in one buffer per thread, reused
 * while the kernel takes each write whole (socket.writableLength stays 0), and a plain-TCP socket reads into one
 * buffer per thread (net's `onread`); only a frame split across reads is copied. TLS sockets read as streams do.
 */
export class WsClient {
  readonly #socket: net.Socket;
  readonly #maxPayload: number;
  readonly #key = randomBytes(16).toString('base64');
  #settled: ((outcome: ConnectOutcome) => void) | undefined;
  #handlers: WsClientHandlers | undefined;
  #state: 'handshake' | 'open' | 'closing' | 'closed' = 'handshake';
  /** Bytes read but not yet used: a partial handshake answer or frame. */
  #pending: Buffer | undefined;
  /** A fragmented message's parts so far, and its opcode. */
  #parts: Buffer[] = [];
  #partsBytes = 0;
  #partsOpcode = -1;
  #closeTimer: NodeJS.Timeout | undefined;

  /**
   * Starts the attempt; `settled` is called once, synchronously from the socket's own event (so nothing the provider
   * sends right after the upgrade comes before it), with its status, Retry-After and request id when refused. `ca`: certificates
   * trusted for wss: instead of the system's (tests).
   */
  constructor(o: ConnectOptions & { ca?: string | Buffer }, settled: (outcome: ConnectOutcome) => void) {
    this.#maxPayload = o.maxPayload;
    this.#settled = settled;
    const url = new URL(o.url);
    const secure = url.protocol === 'wss:';
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const port = Number(url.port || (secure ? 443 : 80));
    const request = this.#request(url, o.headers);
    if (secure) {
      this.#socket = tls.connect({ host, port, servername: net.isIP(host) === 0 ? host : undefined, ALPNProtocols: ['http/1.1'], ...(o.ca !== undefined && { ca: o.ca }) });
      this.#socket.on('data', (chunk: Buffer) => this.#onBytes(chunk));
    } else {
      this.#socket = net.connect({
        host,
        port,
        onread: {
          buffer: readBuffer,
          callback: (n: number, buf: Uint8Array) => {
            this.#onBytes(buf.subarray(0, n) as Buffer);
            return true;
          },
        },
      });
    }
    this.#socket.setNoDelay(true);
    this.#socket.on('error', (err: NodeJS.ErrnoException) => this.#settle({ ok: false, why: `socket error ${err.code ?? err.name}` }));
    this.#socket.on('close', () => this.#onSocketClosed());
    if (typeof request === 'string') this.#socket.write(request);
    else {
      this.#settle(request);
      this.#socket.destroy();
    }
  }

  /** Bytes queued on the socket, not yet taken by the kernel. */
  get bufferedAmount(): number {
    return this.#socket.writableLength;
  }

  get open(): boolean {
    return this.#state === 'open';
  }

  listen(h: WsClientHandlers): void {
    this.#handlers = h;
  }

  sendText(text: string): void {
    if (this.#state !== 'open') return;
    const n = Buffer.byteLength(text);
    const { frame, at } = this.#frame(OP_TEXT, n);
    frame.write(text, at, 'utf8');
    this.#write(frame, at, n);
  }

  /** One binary message of the chunks' bytes, in order. The arrays are only read. */
  sendBinary(chunks: readonly ArrayBufferView[]): void {
    if (this.#state !== 'open') return;
    let n = 0;
    for (const c of chunks) n += c.byteLength;
    const { frame, at } = this.#frame(OP_BINARY, n);
    let to = at;
    for (const c of chunks) {
      frame.set(new Uint8Array(c.buffer, c.byteOffset, c.byteLength), to);
      to += c.byteLength;
    }
    this.#write(frame, at, n);
  }

  /** Ends with a close frame of `code` when open (the socket goes once the provider answers, or after 5 s), else at once; no handler is called afterwards. */
  close(code: number): void {
    if (this.#state !== 'open') return this.terminate();
    this.#handlers = undefined;
    this.#sendClose(code);
    this.#state = 'closing';
    this.#closeTimer = setTimeout(() => this.#socket.destroy(), CLOSE_WAIT_MS).unref();
  }

  /** Frees the socket at once, without a close frame; no handler is called afterwards. */
  terminate(): void {
    this.#handlers = undefined;
    this.#settle({ ok: false, why: 'terminated' });
    this.#state = 'closed';
    this.#pending = undefined;
    this.#parts = [];
    this.#socket.destroy();
  }

  #request(url: URL, headers: Record<string, string>): string | ConnectOutcome {
    const lines = [
      `GET ${url.pathname || '/'}${url.search} HTTP/1.1`,
      `Host: ${url.host}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      `Sec-WebSocket-Key: ${this.#key}`,
      'Sec-WebSocket-Version: 13',
    ];
    for (const [name, value] of Object.entries(headers)) {
      // A header that would split the request is refused, not sent.
      if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name) || /[\r\n\0]/.test(value)) return { ok: false, why: `invalid header ${JSON.stringify(name)}` };
      lines.push(`${name}: ${value}`);
    }
    return `${lines.join('\r\n')}\r\n\r\n`;
  }

  #settle(outcome: ConnectOutcome): void {
    const settled = this.#settled;
    this.#settled = undefined;
    settled?.(outcome);
  }

  #onBytes(data: Buffer): void {
    if (this.#state === 'closed') return;
    let buf = data;
    if (this.#pending !== undefined) {
      buf = Buffer.concat([this.#pending, data]);
      this.#pending = undefined;
    }
    try {
      if (this.#state === 'handshake') {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) {
          if (buf.length > MAX_HEAD_BYTES) throw new ProtocolError(0, 'handshake answer too long');
          this.#pending = Buffer.from(buf);
          return;
        }
        if (!this.#handshake(buf.toString('latin1', 0, end))) return;
        buf = buf.subarray(end + 4);
      }
      const used = this.#frames(buf);
      // What a later read completes is copied: the read buffer is the thread's, and the next read overwrites it.
      if (used < buf.length && this.#live()) this.#pending = Buffer.from(buf.subarray(used));
    } catch (err) {
      this.#fail(err as ProtocolError);
    }
  }

  /** Whether the socket is still read (a handler may have closed it while its frames were handled). */
  #live(): boolean {
    return this.#state !== 'closed';
  }

  /** Checks the answer to the upgrade: true when open (and settled as such). */
  #handshake(head: string): boolean {
    const answer = parseHead(head);
    if (answer === undefined) throw new ProtocolError(0, 'not an HTTP answer');
    const { status, headers } = answer;
    if (status !== 101) {
      this.#settle({ ok: false, status, retryAfter: headers.get('retry-after'), requestId: headers.get('dg-request-id'), why: `handshake refused with ${status}` });
      this.terminate();
      return false;
    }
    const accept = createHash('sha1').update(this.#key + GUID).digest('base64');
    if (headers.get('upgrade')?.toLowerCase() !== 'websocket') throw new ProtocolError(0, 'invalid Upgrade header');
    if (headers.get('sec-websocket-accept') !== accept) throw new ProtocolError(0, 'invalid Sec-WebSocket-Accept header');
    if (headers.has('sec-websocket-extensions') || headers.has('sec-websocket-protocol')) throw new ProtocolError(0, 'an extension or subprotocol not asked for');
    this.#state = 'open';
    this.#settle({ ok: true });
    return true;
  }

  /** Handles the whole frames at the start of `buf`; answers the bytes used. */
  #frames(buf: Buffer): number {
    let at = 0;
    while (this.#state === 'open' || this.#state === 'closing') {
      if (buf.length - at < 2) break;
      const b0 = buf[at]!;
      const b1 = buf[at + 1]!;
      const fin = (b0 & 0x80) !== 0;
      const opcode = b0 & 0x0f;
      if ((b0 & 0x70) !== 0) throw new ProtocolError(1002, 'RSV bits set');
      if ((b1 & 0x80) !== 0) throw new ProtocolError(1002, 'a masked frame from the server');
      let len = b1 & 0x7f;
      let head = 2;
      if (len === 126) {
        if (buf.length - at < 4) break;
        len = buf.readUInt16BE(at + 2);
        head = 4;
      } else if (len === 127) {
        if (buf.length - at < 10) break;
        const high = buf.readUInt32BE(at + 2);
        if (high > 0x1fffff) throw new ProtocolError(1009, 'message too big');
        len = high * 2 ** 32 + buf.readUInt32BE(at + 6);
        head = 10;
      }
      if (opcode >= 0x8) {
        if (!fin || len > 125) throw new ProtocolError(1002, 'invalid control frame');
      } else if (len + this.#partsBytes > this.#maxPayload) throw new ProtocolError(1009, 'message too big');
      if (buf.length - at < head + len) break;
      const payload = buf.subarray(at + head, at + head + len);
      at += head + len;
      this.#frame1(opcode, fin, payload);
    }
    return at;
  }

  #frame1(opcode: number, fin: boolean, payload: Buffer): void {
    switch (opcode) {
      case OP_CONT:
        if (this.#partsOpcode < 0) throw new ProtocolError(1002, 'a continuation frame with no message');
        this.#parts.push(Buffer.from(payload));
        this.#partsBytes += payload.length;
        if (fin) {
          const whole = Buffer.concat(this.#parts);
          const op = this.#partsOpcode;
          this.#parts = [];
          this.#partsBytes = 0;
          this.#partsOpcode = -1;
          this.#message(op, whole);
        }
        return;
      case OP_TEXT:
      case OP_BINARY:
        if (this.#partsOpcode >= 0) throw new ProtocolError(1002, 'a new message inside a fragmented one');
        if (fin) this.#message(opcode, payload);
        else {
          this.#partsOpcode = opcode;
          this.#parts = [Buffer.from(payload)];
          this.#partsBytes = payload.length;
        }
        return;
      case OP_CLOSE:
        return this.#onClose(payload);
      case OP_PING:
        if (this.#state === 'open') this.#control(OP_PONG, payload);
        return;
      case OP_PONG:
        return;
      default:
        throw new ProtocolError(1002, `opcode ${opcode}`);
    }
  }

  #message(opcode: number, payload: Uint8Array): void {
    if (opcode !== OP_TEXT || this.#state !== 'open') return;
    let text: string;
    try {
      text = utf8.decode(payload);
    } catch {
      throw new ProtocolError(1007, 'invalid UTF-8 in a text message');
    }
    this.#handlers?.text(text);
  }

  #onClose(payload: Buffer): void {
    let code = 1005;
    let reason = '';
    if (payload.length === 1) throw new ProtocolError(1002, 'invalid close frame');
    if (payload.length >= 2) {
      code = payload.readUInt16BE(0);
      if (!validCloseCode(code)) throw new ProtocolError(1002, `invalid close code ${code}`);
      try {
        reason = utf8.decode(payload.subarray(2));
      } catch {
        throw new ProtocolError(1007, 'invalid UTF-8 in a close reason');
      }
    }
    // Our own close already went (closing): the exchange is over. Else the provider's is answered with its code.
    if (this.#state === 'open') this.#sendClose(code === 1005 ? 1000 : code);
    this.#state = 'closed';
    this.#pending = undefined;
    this.#socket.end();
    this.#ended(code, reason);
  }

  /** The provider broke the protocol (or the handshake): a close frame with the code when open, then the socket goes. */
  #fail(err: ProtocolError): void {
    if (this.#state === 'handshake') {
      this.#settle({ ok: false, why: err.message });
      this.terminate();
      return;
    }
    if (this.#state === 'open' && err.code > 0) this.#sendClose(err.code);
    this.#state = 'closed';
    this.#pending = undefined;
    this.#socket.end();
    this.#ended(1006, err.message);
  }

  #onSocketClosed(): void {
    clearTimeout(this.#closeTimer);
    if (this.#state === 'handshake') this.#settle({ ok: false, why: 'connection closed during the handshake' });
    const was = this.#state;
    this.#state = 'closed';
    if (was === 'open') this.#ended(1006, '');
  }

  #ended(code: number, reason: string): void {
    const h = this.#handlers;
    this.#handlers = undefined;
    h?.close(code, reason);
  }

  #sendClose(code: number): void {
    const payload = Buffer.allocUnsafe(2);
    payload.writeUInt16BE(code, 0);
    this.#control(OP_CLOSE, payload);
  }

  #control(opcode: number, payload: Uint8Array): void {
    const { frame, at } = this.#frame(opcode, payload.length);
    frame.set(payload, at);
    this.#write(frame, at, payload.length);
  }

  /** A buffer holding the header of a final frame of `opcode` with an `n`-byte payload, to be written from `at`. */
  #frame(opcode: number, n: number): { frame: Buffer; at: number } {
    const lengthBytes = n < 126 ? 0 : n < 65536 ? 2 : 8;
    const at = 2 + lengthBytes + 4;
    const size = at + n;
    let frame = writeBuffer;
    if (size > frame.length) {
      frame = Buffer.allocUnsafe(size <= MAX_KEPT_WRITE_BYTES ? Math.max(size, 2 * frame.length) : size);
      if (frame.length <= MAX_KEPT_WRITE_BYTES) writeBuffer = frame;
    }
    frame[0] = 0x80 | opcode;
    if (lengthBytes === 0) frame[1] = 0x80 | n;
    else if (lengthBytes === 2) {
      frame[1] = 0x80 | 126;
      frame.writeUInt16BE(n, 2);
    } else {
      frame[1] = 0x80 | 127;
      frame.writeUInt32BE(Math.floor(n / 2 ** 32), 2);
      frame.writeUInt32BE(n >>> 0, 6);
    }
    if (randomAt + 4 > randomPool.length) {
      randomFillSync(randomPool);
      randomAt = 0;
    }
    randomPool.copy(frame, at - 4, randomAt, randomAt + 4);
    randomAt += 4;
    return { frame, at };
  }

  /** Masks the payload in place and writes the frame; a buffer the socket still holds is not reused. */
  #write(frame: Buffer, at: number, n: number): void {
    mask(frame, at - 4, at, n);
    this.#socket.write(frame.subarray(0, at + n));
    if (frame === writeBuffer && this.#socket.writableLength > 0) writeBuffer = Buffer.allocUnsafe(writeBuffer.length);
  }
}

/** XORs `n` bytes from `at` with the 4-byte key at `keyAt` (a word at a time where the payload is aligned). */
function mask(buf: Buffer, keyAt: number, at: number, n: number): void {
  keyBytes.set(buf.subarray(keyAt, keyAt + 4));
  let i = 0;
  const abs = buf.byteOffset + at;
  if (abs % 4 === 0 && n >= 16) {
    const words = new Uint32Array(buf.buffer, abs, n >>> 2);
    const key = keyWord[0]!;
    for (let w = 0; w < words.length; w++) words[w] = words[w]! ^ key;
    i = words.length * 4;
  }
  for (; i < n; i++) buf[at + i] = buf[at + i]! ^ keyBytes[i & 3]!;
}
