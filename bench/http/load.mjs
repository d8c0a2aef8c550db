// The rest bench's HTTP/1.1 load generator (what autocannon measures, without a dependency): keep-alive raw sockets, a
// pre-built request written again as each answer completes (or `pipelining` in flight), latency and errors counted.
import net from 'node:net';
import { Histogram } from '../lib/histogram.mjs';

/**
 * @typedef {object} LoadOptions
 * @property {string} url
 * @property {string[]} [paths] request paths (with their query) taken in turn instead of the URL's, one per request
 * @property {string} [method] default GET
 * @property {Record<string, string>} [headers]
 * @property {string} [body]
 * @property {number} connections
 * @property {number} [pipelining] requests in flight per connection (default 1)
 * @property {number} duration seconds
 * @property {number} [timeoutMs] an answer slower than this counts as a timeout and the connection is replaced (default 10 s)
 */

/**
 * Reads complete HTTP/1.1 responses off a byte stream (Content-Length or chunked bodies).
 * @param {(status: number, bytes: number) => void} onResponse
 */
function responseReader(onResponse) {
  /** @type {Buffer} */
  let buf = Buffer.alloc(0);
  return (/** @type {Buffer} */ chunk) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      const status = Number(head.slice(9, 12));
      const len = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      let total;
      if (len) {
        total = end + 4 + Number(len[1]);
        if (buf.length < total) return;
      } else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
        let at = end + 4;
        for (;;) {
          const lineEnd = buf.indexOf('\r\n', at);
          if (lineEnd < 0) return;
          const size = parseInt(buf.subarray(at, lineEnd).toString('latin1'), 16);
          at = lineEnd + 2 + size + 2;
          if (at > buf.length) return;
          if (size === 0) break;
        }
        total = at;
      } else total = end + 4;
      onResponse(status, total);
      buf = buf.subarray(total);
    }
  };
}

/**
 * Runs the load for `duration` seconds; answers figures shaped like autocannon's (requests/s, latency percentiles).
 * @param {LoadOptions} o
 */
export async function load(o) {
  const u = new URL(o.url);
  const body = o.body ? Buffer.from(o.body) : undefined;
  const headers = { host: u.host, ...(body ? { 'content-length': String(body.length) } : {}), ...o.headers };
  const head = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const requests = (o.paths ?? [`${u.pathname}${u.search}`]).map((p) => Buffer.concat([Buffer.from(`${o.method ?? 'GET'} ${p} HTTP/1.1\r\n${head}\r\n`), ...(body ? [body] : [])]));
  let turn = 0;
  const pipelining = o.pipelining ?? 1;
  const timeoutMs = o.timeoutMs ?? 10_000;
  const latency = new Histogram();
  const r = { total: 0, non2xx: 0, errors: 0, timeouts: 0, bytes: 0 };
  const deadline = performance.now() + o.duration * 1000;
  let running = true;
  /** @type {Set<net.Socket>} */
  const sockets = new Set();

  const connect = () => {
    if (!running) return;
    /** @type {number[]} */
    const sentAt = [];
    const socket = net.connect({ host: u.hostname, port: Number(u.port), noDelay: true });
    sockets.add(socket);
    const send = () => {
      sentAt.push(performance.now());
      socket.write(/** @type {Buffer} */ (requests[turn++ % requests.length]));
    };
    const timer = setInterval(() => {
      if (sentAt.length > 0 && performance.now() - (sentAt[0] ?? 0) > timeoutMs) {
        r.timeouts++;
        socket.destroy();
      }
    }, 1000);
    socket.on('connect', () => {
      for (let i = 0; i < pipelining; i++) send();
    });
    socket.on(
      'data',
      responseReader((status, bytes) => {
        const t = sentAt.shift();
        if (t === undefined) return;
        const now = performance.now();
        if (now > deadline) {
          running = false;
          return;
        }
        latency.record(now - t);
        r.total++;
        r.bytes += bytes;
        if (status < 200 || status > 299) r.non2xx++;
        send();
      }),
    );
    socket.on('error', () => r.errors++);
    socket.on('close', () => {
      clearInterval(timer);
      sockets.delete(socket);
      connect();
    });
  };
  for (let i = 0; i < o.connections; i++) connect();
  await new Promise((resolve) => setTimeout(resolve, o.duration * 1000));
  running = false;
  for (const s of sockets) s.destroy();
  const s = latency.summary();
  return {
    requests: { average: r.total / o.duration, total: r.total },
    latency: { p50: s.p50 ?? NaN, p99: s.p99 ?? NaN },
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    throughput: { average: r.bytes / o.duration },
  };
}
