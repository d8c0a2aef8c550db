// Just enough of a WebSocket client for a simulated device: a raw-socket upgrade and frames pre-masked once, shared by
// every device (RFC 6455 does not ask keys to vary), since `ws` masking and copying each frame would dominate the generator.
import net from 'node:net';
import { randomBytes } from 'node:crypto';

const MASK = Buffer.from([0x37, 0xfa, 0x21, 0x3d]);
export const OP = /** @type {const} */ ({ TEXT: 1, BINARY: 2, CLOSE: 8, PING: 9, PONG: 10 });

/**
 * One masked client frame.
 * @param {number} opcode
 * @param {Uint8Array} payload
 */
export function maskedFrame(opcode, payload) {
  const len = payload.length;
  const ext = len < 126 ? 0 : len < 65536 ? 2 : 8;
  const out = Buffer.allocUnsafe(2 + ext + 4 + len);
  out[0] = 0x80 | opcode;
  if (ext === 0) out[1] = 0x80 | len;
  else if (ext === 2) {
    out[1] = 0x80 | 126;
    out.writeUInt16BE(len, 2);
  } else {
    out[1] = 0x80 | 127;
    out.writeBigUInt64BE(BigInt(len), 2);
  }
  const at = 2 + ext + 4;
  MASK.copy(out, 2 + ext);
  for (let i = 0; i < len; i++) out[at + i] = /** @type {number} */ (payload[i]) ^ /** @type {number} */ (MASK[i & 3]);
  return out;
}

/** @param {number} code */
export function closeFrame(code) {
  const p = Buffer.alloc(2);
  p.writeUInt16BE(code, 0);
  return maskedFrame(OP.CLOSE, p);
}

/**
 * @typedef {object} RawWsHandlers
 * @property {() => void} onOpen the upgrade answered 101
 * @property {(text: string) => void} onText
 * @property {(code: number, reason: string) => void} onCloseFrame the server sent a close frame (answered already)
 * @property {(status: number, why: string) => void} onRefused the upgrade answered something else (0: no HTTP
 *   answer; `why` then says what happened instead: the socket error's code, or the handshake timeout)
 * @property {(hadError: boolean, why: string) => void} onSocketClose the TCP connection is gone (`why`: the socket
 *   error's code, if any)
 */

/**
 * Opens a WebSocket to `host:port` + `pathQuery` with extra request headers; returns the socket.
 * @param {{ host: string, port: number, pathQuery: string, headers: Record<string, string>, handshakeTimeoutMs?: number }} o
 * @param {RawWsHandlers} h
 */
export function openRawWs(o, h) {
  const socket = net.connect({ host: o.host, port: o.port, noDelay: true });
  const headers = Object.entries(o.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  let upgraded = false;
  let refused = false;
  let sentClose = false;
  /** @type {Buffer | undefined} */
  let pending;
  /** What ended the socket other than a close handshake: an error's code, or the handshake timeout. */
  let why = '';
  // An upgrade nobody answers (a server too busy to accept) must not hold its slot forever: it counts as refused (0).
  const handshakeMs = o.handshakeTimeoutMs ?? 15_000;
  const handshakeTimer = setTimeout(() => {
    why = `no answer in ${handshakeMs / 1000} s`;
    socket.destroy();
  }, handshakeMs);
  socket.on('connect', () => {
    socket.write(
      `GET ${o.pathQuery} HTTP/1.1\r\nHost: ${o.host}:${o.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n${headers}\r\n`,
    );
  });
  socket.on('data', (/** @type {Buffer} */ chunk) => {
    let buf = pending ? Buffer.concat([pending, chunk]) : chunk;
    pending = undefined;
    if (!upgraded) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) {
        pending = buf;
        return;
      }
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(buf.subarray(0, 16).toString('latin1'))?.[1] ?? 0);
      if (status !== 101) {
        refused = true;
        h.onRefused(status, '');
        socket.destroy();
        return;
      }
      upgraded = true;
      clearTimeout(handshakeTimer);
      buf = buf.subarray(end + 4);
      h.onOpen();
    }
    // Server frames are never masked; uWS does not fragment the small frames the listen protocol sends.
    while (buf.length >= 2) {
      const opcode = /** @type {number} */ (buf[0]) & 0x0f;
      let len = /** @type {number} */ (buf[1]) & 0x7f;
      let off = 2;
      if (len === 126) {
        if (buf.length < 4) break;
        len = buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (buf.length < 10) break;
        len = Number(buf.readBigUInt64BE(2));
        off = 10;
      }
      if (buf.length < off + len) break;
      const payload = buf.subarray(off, off + len);
      buf = buf.subarray(off + len);
      if (opcode === OP.TEXT) h.onText(payload.toString('utf8'));
      else if (opcode === OP.PING) socket.write(maskedFrame(OP.PONG, payload));
      else if (opcode === OP.CLOSE) {
        const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        if (!sentClose) socket.write(closeFrame(code === 1005 ? 1000 : code));
        sentClose = true;
        socket.end();
        h.onCloseFrame(code, payload.subarray(2).toString('utf8'));
      }
    }
    if (buf.length > 0) pending = Buffer.from(buf);
  });
  socket.on('error', (/** @type {NodeJS.ErrnoException} */ err) => {
    why ||= err.code ?? err.message; // 'close' follows with hadError
  });
  socket.on('close', (hadError) => {
    clearTimeout(handshakeTimer);
    if (!upgraded && !refused) h.onRefused(0, why || 'closed');
    h.onSocketClose(hadError, why);
  });
  return {
    socket,
    /** Sends our close frame once; the server answers with its own and closes the TCP connection. */
    close(code = 1000) {
      if (sentClose || socket.destroyed) return;
      sentClose = true;
      socket.write(closeFrame(code));
    },
    get upgraded() {
      return upgraded;
    },
  };
}
