// Outbound delivery connections: an undici pool per origin, kept alive, whose every new connection goes through the
// destination guard (the host resolved once, every address checked, the socket connected to the checked address,
// TLS SNI the URL's host). Redirects are never followed: a 3xx is an answer like any other.
//
// Rationale: undici sends a delivery for about half the CPU of node:http's client (docs/architecture.md), and a
// connection is checked when it opens rather than a name resolved again for every request on a kept socket.
import net from 'node:net';
import tls from 'node:tls';
import { Pool } from 'undici';
import { DestinationRefused, parseDestination, type DestinationGuard } from './destination.js';

/** What a receiver answered. */
export interface DeliveryResponse {
  readonly status: number;
  /** The answer's Retry-After, as sent. */
  readonly retryAfter: string | undefined;
  /** At most the request's maxResponseBytes of the answer's body. */
  readonly body: Buffer;
}

export interface DeliverySend {
  readonly method?: string;
  /** Header names and values, alternating (content-length is undici's, from the body). */
  readonly headers: string[];
  readonly body: string | Buffer;
  /** Whole request, connect to last byte. */
  readonly timeoutMs: number;
  /** Bytes of the answer kept; the rest is read and dropped. */
  readonly maxResponseBytes: number;
}

export interface DeliveryClientOptions {
  /** Connections kept to one origin. @defaultValue 64 */
  readonly connections?: number;
  /** How long an idle connection is kept at most (a receiver may ask for less). @defaultValue 30 s */
  readonly keepAliveMs?: number;
  /** Longest wait for a new connection (the request's own timeout also bounds it). @defaultValue 15 s */
  readonly connectTimeoutMs?: number;
}

type Connector = (
  opts: { hostname: string; protocol: string; port: string },
  cb: (err: Error | null, socket: net.Socket | tls.TLSSocket | null) => void,
) => void;

const timeoutError = (message: string): Error => Object.assign(new Error(message), { name: 'TimeoutError' });

const EMPTY = Buffer.alloc(0);

export class DeliveryClient {
  readonly #guard: DestinationGuard;
  readonly #pools = new Map<string, Pool>();
  readonly #connections: number;
  readonly #keepAliveMs: number;
  readonly #connectTimeoutMs: number;
  #closed = false;

  constructor(guard: DestinationGuard, o: DeliveryClientOptions = {}) {
    this.#guard = guard;
    this.#connections = o.connections ?? 64;
    this.#keepAliveMs = o.keepAliveMs ?? 30_000;
    this.#connectTimeoutMs = o.connectTimeoutMs ?? 15_000;
  }

  /**
   * One request. Rejects with DestinationRefused (the URL's form, or the host when a connection opens), the socket's
   * error, or an Error named 'TimeoutError'.
   */
  send(raw: string | URL, req: DeliverySend): Promise<DeliveryResponse> {
    let url: URL;
    try {
      url = parseDestination(raw);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.#closed) return Promise.reject(new Error('delivery client closed'));
    const pool = this.#pool(url.origin);
    return new Promise<DeliveryResponse>((resolve, reject) => {
      let status = 0;
      let retryAfter: string | undefined;
      let chunks: Buffer[] | undefined;
      let kept = 0;
      let abort: ((err?: Error) => void) | undefined;
      let done = false;
      const limit = req.maxResponseBytes;
      const timer = setTimeout(() => {
        if (done) return;
        done = true;
        const err = timeoutError('request timed out');
        reject(err);
        abort?.(err);
      }, req.timeoutMs);
      pool.dispatch(
        { origin: url.origin, path: url.pathname + url.search, method: (req.method ?? 'POST') as 'POST', headers: req.headers, body: req.body },
        {
          onConnect: (a) => {
            abort = a;
            if (done) a(timeoutError('request timed out'));
          },
          onHeaders: (code, raw) => {
            status = code;
            if (code === 429 || code === 503) retryAfter = headerOf(raw, 'retry-after');
            return true;
          },
          onData: (c) => {
            if (kept < limit && status >= 200 && status < 300) {
              const part = c.length <= limit - kept ? c : c.subarray(0, limit - kept);
              (chunks ??= []).push(part);
              kept += part.length;
            }
            return true;
          },
          onComplete: () => {
            clearTimeout(timer);
            if (done) return;
            done = true;
            resolve({ status, retryAfter, body: chunks === undefined ? EMPTY : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) });
          },
          onError: (err) => {
            clearTimeout(timer);
            if (done) return;
            done = true;
            reject(err);
          },
        },
      );
    });
  }

  /** How many origins have a pool now (one without connections or requests is forgotten). */
  get origins(): number {
    return this.#pools.size;
  }

  /** Drops every connection at once (requests still under way fail). */
  async close(): Promise<void> {
    this.#closed = true;
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((p) => p.destroy().catch(() => undefined)));
  }

  /** The origin's pool; one left without connections or requests is closed and forgotten (endpoints come and go). */
  #pool(origin: string): Pool {
    let pool = this.#pools.get(origin);
    if (pool) return pool;
    const created = new Pool(origin, { connections: this.#connections, pipelining: 1, keepAliveTimeout: this.#keepAliveMs, keepAliveMaxTimeout: this.#keepAliveMs, connect: this.#connect as never });
    // Checked once the pool has settled after the event (the request a failed connection was for fails after it).
    const forgetIfIdle = (): void => {
      setImmediate(() => {
        const s = created.stats;
        if (s.connected === 0 && s.size === 0 && this.#pools.get(origin) === created) {
          this.#pools.delete(origin);
          void created.close().catch(() => undefined);
        }
      });
    };
    created.on('disconnect', forgetIfIdle).on('connectionError', forgetIfIdle);
    this.#pools.set(origin, (pool = created));
    return pool;
  }

  /** A new connection: the host checked now, the socket to the checked address, SNI the host name. */
  readonly #connect: Connector = ({ hostname, protocol, port }, cb) => {
    const host = net.isIPv6(hostname) ? `[${hostname}]` : hostname;
    this.#guard.check(`${protocol}//${host}/`).then(
      (d) => {
        const https = protocol === 'https:';
        const p = Number(port) || (https ? 443 : 80);
        const socket = https
          ? tls.connect({ host: d.address, port: p, ...(net.isIP(hostname) === 0 ? { servername: hostname } : {}), ALPNProtocols: ['http/1.1'] })
          : net.connect({ host: d.address, port: p });
        socket.setNoDelay(true);
        socket.setKeepAlive(true, 60_000);
        const timer = setTimeout(() => socket.destroy(timeoutError('connect timed out')), this.#connectTimeoutMs);
        const connected = (): void => {
          clearTimeout(timer);
          socket.off('error', failed);
          cb(null, socket);
        };
        const failed = (err: Error): void => {
          clearTimeout(timer);
          socket.off(https ? 'secureConnect' : 'connect', connected);
          cb(err, null);
        };
        socket.once(https ? 'secureConnect' : 'connect', connected).once('error', failed);
      },
      (err: unknown) => cb(err instanceof DestinationRefused ? err : new DestinationRefused('unresolvable'), null),
    );
  };
}

/** A header's first value from undici's raw list (names and values alternating, as Buffers). */
function headerOf(raw: Buffer[], name: string): string | undefined {
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.length === name.length && raw[i]!.toString('latin1').toLowerCase() === name) return raw[i + 1]!.toString('latin1');
  return undefined;
}
