// Baseline of the fleet bench: a bare uWebSockets.js /v4/listen that only decodes each frame inline (no auth, actors or
// STT), the machine's practical ceiling; same /stats as the provider_a fake. Run: node bench/listen/bare-listen.mjs
// --port N --codec opus_fs320 --sample-rate 16000 (SIGTERM closes it). With --forward URL --key K it also does what a
// listen node cannot skip: each session's PCM goes on to a provider_a socket of its own, 100 ms to a message.
import path from 'node:path';
import uWS from 'uWebSockets.js';
import { Histogram } from '../lib/histogram.mjs';
import { ROOT_DIR, parseArgs } from '../lib/report.mjs';

const { options } = parseArgs(process.argv.slice(2));
const port = Number(options.port ?? 0);
const codec = String(options.codec ?? 'opus_fs320');
const sampleRate = Number(options['sample-rate'] ?? 16000);
const { createChannelDecoder } = await import(path.join(ROOT_DIR, 'dist/workers/channel-decoders.js'));
const forward = typeof options.forward === 'string' ? `${options.forward}?encoding=linear16&sample_rate=16000&channels=1` : undefined;
const forwardKey = String(options.key ?? '');
const { WsClient } = forward ? await import(path.join(ROOT_DIR, 'dist/workers/ws-client.js')) : { WsClient: undefined };
/** Samples of 16 kHz PCM to one provider message, as the service sends them. */
const MESSAGE_SAMPLES = 1600;
const READY = JSON.stringify({ type: 'service_status', status: 'ready' });

/** Same figures, same names as the provider_a fake's GET /stats: bytes and chunks of 16 kHz s16le PCM, lag per chunk. */
const stats = { streamsOpened: 0, streamsOpen: 0, bytes: 0, chunks: 0, frames: 0, inBytes: 0, corruptFrames: 0, forwardedBytes: 0, uplinksRefused: 0 };
let lag = new Histogram();

/**
 * @typedef {object} Session
 * @property {any} decoder
 * @property {number} samples PCM samples out so far
 * @property {number} t0 least (arrival − audio position) seen, in ms: lag = arrival − (t0 + position)
 * @property {any} [uplink] the provider socket (--forward)
 * @property {Int16Array} [out] PCM waiting for the next message
 * @property {number} [outAt] samples in `out`
 */

/**
 * Counts one batch of decoded PCM at its arrival time.
 * @param {Session} s
 * @param {{ pcm: Int16Array[], corruptFrames: number }} r
 */
function counted(s, r) {
  const now = performance.now();
  for (const p of r.pcm) {
    if (p.length === 0) continue;
    s.samples += p.length;
    stats.chunks++;
    stats.bytes += p.length * 2;
    const pos = s.samples / 16; // ms of audio up to the end of this chunk
    if (now - pos < s.t0) s.t0 = now - pos;
    lag.record(now - (s.t0 + pos));
    if (s.out) send(s, p);
  }
  stats.corruptFrames += r.corruptFrames;
}

/**
 * Copies PCM into the session's next provider message, sending each one that fills (audio before the socket opened
 * is dropped by it: a few frames).
 * @param {Session} s
 * @param {Int16Array} p
 */
function send(s, p) {
  const out = /** @type {Int16Array} */ (s.out);
  let at = 0;
  while (at < p.length) {
    const n = Math.min(p.length - at, MESSAGE_SAMPLES - /** @type {number} */ (s.outAt));
    out.set(p.subarray(at, at + n), s.outAt);
    s.outAt = /** @type {number} */ (s.outAt) + n;
    at += n;
    if (s.outAt === MESSAGE_SAMPLES) {
      s.uplink.sendBinary([out]);
      stats.forwardedBytes += out.byteLength;
      s.outAt = 0;
    }
  }
}

/** @param {uWS.HttpResponse} res @param {unknown} body */
function json(res, body) {
  res.cork(() => res.writeHeader('content-type', 'application/json').end(JSON.stringify(body)));
}
const snapshot = () => ({ ...stats, lagMs: lag.summary(), lagHistogram: lag.toJSON() });

/** @type {unknown} */
let listenSocket;
uWS
  .App()
  .ws('/v4/listen', {
    compression: uWS.DISABLED,
    maxPayloadLength: 64 * 1024,
    idleTimeout: 0,
    open: (ws) => {
      /** @type {Session} */
      const s = ws.getUserData();
      s.decoder = createChannelDecoder({ codec, sampleRate, channels: 1 });
      s.samples = 0;
      s.t0 = Infinity;
      if (WsClient) {
        const uplink = new WsClient({ url: forward, headers: { authorization: `Token ${forwardKey}` }, maxPayload: 1 << 20 }, (/** @type {{ ok: boolean }} */ o) => {
          if (o.ok) uplink.listen({ text: () => undefined, close: () => undefined });
          else stats.uplinksRefused++;
        });
        s.uplink = uplink;
        s.out = new Int16Array(MESSAGE_SAMPLES);
        s.outAt = 0;
      }
      stats.streamsOpened++;
      stats.streamsOpen++;
      ws.send(READY, false);
    },
    message: (ws, message, isBinary) => {
      if (!isBinary || message.byteLength <= 2) return; // keep-alive or text
      /** @type {Session} */
      const s = ws.getUserData();
      stats.frames++;
      stats.inBytes += message.byteLength;
      counted(s, s.decoder.decode([new Uint8Array(message.slice(0))]));
    },
    close: (ws) => {
      /** @type {Session} */
      const s = ws.getUserData();
      // Like the service's drain: the decoder's tail (the resampler's) counts as delivered PCM.
      counted(s, { pcm: [s.decoder.end()], corruptFrames: 0 });
      s.decoder.dispose();
      if (s.uplink) {
        if (s.outAt) s.uplink.sendBinary([/** @type {Int16Array} */ (s.out).subarray(0, s.outAt)]);
        stats.forwardedBytes += /** @type {number} */ (s.outAt) * 2;
        s.uplink.close(1000);
      }
      stats.streamsOpen--;
    },
  })
  .get('/stats', (res) => json(res, snapshot()))
  .post('/stats/reset', (res) => {
    // Answers the figures it resets, so a reader that polls with reset loses no chunk between two calls.
    const before = snapshot();
    lag = new Histogram();
    json(res, before);
  })
  .listen('127.0.0.1', port, (token) => {
    if (!token) {
      process.stderr.write(`bare-listen: cannot listen on ${port}\n`);
      process.exit(1);
    }
    listenSocket = token;
    process.stdout.write(`${JSON.stringify({ port: uWS.us_socket_local_port(token) })}\n`);
  });

process.on('SIGTERM', () => {
  if (listenSocket) uWS.us_listen_socket_close(/** @type {any} */ (listenSocket));
  process.exit(0);
});
