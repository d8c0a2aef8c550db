// One client WebSocket connection attempt to a speech provider from the main thread (engine/stt/provider-a/engine.ts and
// provider-b.ts with STT_SOCKETS=main), with `ws`: no compression, no redirects, and a refused handshake reported with
// its status, Retry-After and request id (ws alone says only "Unexpected server response"). A codec shard's sockets
// (workers/uplink.ts) use the leaner workers/ws-client.ts, which reports its attempts the same way.
import WebSocket from 'ws';

/** How an attempt went: open, or why not (`status` when the provider answered the upgrade with an HTTP error). */
export type ConnectOutcome = { ok: true } | { ok: false; status?: number; retryAfter?: string | undefined; requestId?: string | undefined; why: string };

export interface ConnectOptions {
  url: string;
  headers: Record<string, string>;
  /** Longest message taken from the provider, in bytes. */
  maxPayload: number;
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Starts the attempt; `settled` is called once, synchronously from the socket's own event (so nothing the provider
 * sends right after the upgrade comes before it). Socket errors after that are left to the caller's listeners
 * (a close follows them); terminating the socket before it opened settles the attempt as failed.
 */
export function connectWs(o: ConnectOptions, settled: (outcome: ConnectOutcome) => void): WebSocket {
  const ws = new WebSocket(o.url, { headers: o.headers, perMessageDeflate: false, followRedirects: false, maxPayload: o.maxPayload });
  let done = false;
  const settle = (outcome: ConnectOutcome): void => {
    if (done) return;
    done = true;
    settled(outcome);
  };
  ws.on('unexpected-response', (req, res) => {
    const status = res.statusCode ?? 0;
    req.destroy();
    res.destroy();
    settle({ ok: false, status, retryAfter: headerValue(res.headers['retry-after']), requestId: headerValue(res.headers['dg-request-id']), why: `handshake refused with ${status}` });
  });
  ws.on('error', (err) => settle({ ok: false, why: `socket error ${err.name}` }));
  ws.once('open', () => settle({ ok: true }));
  return ws;
}
