// The HTTP adapter over uWebSockets.js: routing, bounded body reads, validation, auth hook, error bodies. One of the two files that touch uWS.
// One file because routing, body reads and error replies share uWS's request lifetime rules (abort, cork, one read).
import uWS from 'uWebSockets.js';
import type { TSchema } from '@sinclair/typebox';
import type { Logger } from 'pino';
import client from 'prom-client';
import { EngineError, isEngineError } from '../engine/errors.js';
import { isStoreUnavailable } from '../engine/db/store-errors.js';
import { isRedisUnavailable } from '../engine/redis.js';
import { ResponseCache, type Ticket } from './response-cache.js';
import { compile, type Validator } from './validation.js';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export type { AuthSpec, AuthResult } from '../engine/identity/authenticate.js';
import type { AuthSpec, AuthResult } from '../engine/identity/authenticate.js';

export interface RequestContext<P = unknown> {
  readonly params: Readonly<Record<string, string>>;
  readonly query: any;
  readonly body: any;
  readonly auth: P;
  /** Lower-case header names. */
  readonly headers: Readonly<Record<string, string>>;
  /** The body as read, for a route without a body schema that parses it itself (MCP's JSON-RPC errors). */
  readonly raw?: Buffer;
}

export interface Reply {
  /** @defaultValue 200 */
  status?: number;
  /** Serialised as JSON unless `text` is given. */
  body?: unknown;
  /** Raw text body, sent with `contentType`. */
  text?: string;
  /** A body already serialised as JSON (sent as application/json), for routes whose store builds the JSON. */
  json?: string;
  /** A binary body (stored audio), sent with `contentType`. */
  bytes?: Buffer;
  contentType?: string;
  headers?: Record<string, string>;
  /**
   * A long-lived streamed answer (server-sent events): headers go out at once with `contentType`, then the
   * function gets a sink to write to until either side closes (a closed one if the client has already left).
   */
  stream?: (sink: StreamSink) => void;
}

/** The writing end of a streamed answer. */
export interface StreamSink {
  readonly closed: boolean;
  /** Writes a chunk; false when the stream is closed (nothing was written). */
  write(chunk: string): boolean;
  /** Ends the answer; idempotent. */
  end(): void;
  /** Called once when the stream closes, by either side. */
  onClose(fn: () => void): void;
}

export interface RouteDoc {
  readonly summary: string;
  readonly tags?: readonly string[];
  readonly description?: string;
  /** Response schemas by status, for the OpenAPI document. */
  readonly responses?: Readonly<Record<number, { description: string; schema?: TSchema }>>;
}

export interface Route<P = unknown> extends RouteDoc {
  readonly method: Method;
  /** OpenAPI-style path, `{name}` for parameters. */
  readonly path: string;
  readonly operationId: string;
  readonly auth: AuthSpec;
  readonly query?: TSchema;
  readonly body?: TSchema;
  /**
   * Largest body this route reads, in bytes, when it differs from the adapter's (uploads take more than JSON).
   * @defaultValue HttpAdapterOptions.maxBodyBytes
   */
  readonly maxBodyBytes?: number;
  /**
   * A body the route reads itself from `raw` (no `body` schema): its media types and their schemas, for the OpenAPI
   * document only.
   */
  readonly rawBody?: { readonly description: string; readonly content: Readonly<Record<string, TSchema>> };
  /** Hidden routes (health, metrics) stay out of the OpenAPI document. */
  readonly hidden?: boolean;
  /**
   * An account-level check run after authentication and before query/body validation (the memory readiness gate),
   * so a refused account hears why whatever the request carries. Throws an EngineError to refuse. `dataVersion` is the
   * account's data version when known (see AuthResult), so the check may reuse what it found at that version.
   */
  guard?(auth: P, dataVersion: string | undefined): Promise<void> | void;
  /**
   * A GET whose 200 answer depends only on the caller's versioned data (engine/cache/data-versions.ts), the path and the
   * query: its serialised answer is kept and reused while the caller's data version stands. Authentication, rate
   * limits and the guard still run on every request.
   */
  readonly cacheable?: boolean;
  handler(ctx: RequestContext<P>): Reply | Promise<Reply>;
}

export interface HttpAdapterOptions<P> {
  readonly logger: Logger;
  readonly registry: client.Registry;
  /** Largest request body read, in bytes. */
  readonly maxBodyBytes: number;
  /** Bytes of serialised answers of `cacheable` routes kept for reuse; 0 keeps none. @defaultValue 0 */
  readonly responseCacheBytes?: number;
  /** `remoteAddress` is the peer's address as text, the subject of refused credentials' rate limits. */
  authenticate(spec: AuthSpec, headers: Readonly<Record<string, string>>, route: Route<P>, remoteAddress: string): Promise<AuthResult<P>>;
}

/** uSockets' LIBUS_LISTEN_DEFAULT: the port may be shared (SO_REUSEPORT); 1 would be LIBUS_LISTEN_EXCLUSIVE_PORT. */
const LISTEN_SHARED_PORT = 0;

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 400: 'Bad Request', 401: 'Unauthorized',
  403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 408: 'Request Timeout', 409: 'Conflict',
  413: 'Payload Too Large', 415: 'Unsupported Media Type', 422: 'Unprocessable Entity', 429: 'Too Many Requests',
  500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout',
};

const STATUS_LINES = new Map(Object.entries(STATUS_TEXT).map(([code, text]) => [Number(code), `${code} ${text}`]));
const statusLine = (status: number): string => STATUS_LINES.get(status) ?? `${status} Unknown`;

interface Compiled<P> {
  route: Route<P>;
  paramNames: string[];
  pattern: RegExp;
  query?: Validator<unknown>;
  body?: Validator<unknown>;
}

const BODY_METHODS = new Set(['post', 'put', 'patch', 'delete']);

class BodyTooLarge extends Error {}

interface RequestState {
  aborted: boolean;
  /** Set by a streamed answer, to hear that the client went away. */
  onAbort?: () => void;
}

/** Reads a request body of at most `limit` bytes; rejects with BodyTooLarge as soon as it is exceeded. */
function readBody(res: uWS.HttpResponse, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    res.onData((ab, isLast) => {
      if (done) return;
      size += ab.byteLength;
      if (size > limit) {
        done = true;
        reject(new BodyTooLarge());
        return;
      }
      // uWS reuses the ArrayBuffer after this callback: copy it.
      chunks.push(Buffer.from(new Uint8Array(ab).slice()));
      if (isLast) {
        done = true;
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
      }
    });
  });
}

function parseQuery(raw: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!raw) return out;
  // FastAPI takes the last value of a repeated scalar parameter.
  for (const [k, v] of new URLSearchParams(raw)) out[k] = v;
  return out;
}

/** Position of a JSON syntax error, as pydantic reports it in `loc`. */
function jsonErrorPosition(err: unknown): number {
  const m = /position (\d+)/.exec(err instanceof Error ? err.message : '');
  return m ? Number(m[1]) : 0;
}

export class HttpAdapter<P> {
  readonly app: uWS.TemplatedApp;
  readonly #routes: Compiled<P>[] = [];
  readonly #opts: HttpAdapterOptions<P>;
  readonly #requests: client.Counter<'method' | 'route' | 'status'>;
  readonly #duration: client.Histogram<'method' | 'route'>;
  readonly #responses: ResponseCache;
  #listenSocket: uWS.us_listen_socket | undefined;
  #inFlight = 0;
  readonly #streams = new Set<StreamSink>();
  #idle: (() => void) | undefined;

  constructor(opts: HttpAdapterOptions<P>) {
    if (typeof uWS.SSLApp !== 'function' || typeof uWS.App !== 'function') {
      throw new EngineError('ENG_ERR_BOOT_UWS_NATIVE');
    }
    this.#opts = opts;
    this.app = uWS.App();
    this.#requests = new client.Counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered, by route pattern and status.',
      labelNames: ['method', 'route', 'status'],
      registers: [opts.registry],
    });
    this.#duration = new client.Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time from request to answer, in seconds.',
      labelNames: ['method', 'route'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [opts.registry],
    });
    this.#responses = new ResponseCache(opts.responseCacheBytes ?? 0, opts.registry);
  }

  get routes(): readonly Route<P>[] {
    return this.#routes.map((r) => r.route);
  }

  /** Requests whose answer has not been written yet. */
  get inFlight(): number {
    return this.#inFlight;
  }

  add(route: Route<P>): this {
    const paramNames: string[] = [];
    const uwsPath = route.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      paramNames.push(name);
      return `:${name}`;
    });
    const pattern = new RegExp(`^${route.path.replace(/\{\w+\}/g, '[^/]+')}/?$`);
    const compiled: Compiled<P> = {
      route,
      paramNames,
      pattern,
      ...(route.query ? { query: compile(route.query, 'query') } : {}),
      ...(route.body ? { body: compile(route.body, 'body') } : {}),
    };
    this.#routes.push(compiled);
    const handler = (res: uWS.HttpResponse, req: uWS.HttpRequest): void => this.#handle(compiled, res, req);
    const register = { get: this.app.get, post: this.app.post, put: this.app.put, patch: this.app.patch, delete: this.app.del }[route.method];
    register.call(this.app, uwsPath, handler);
    return this;
  }

  /** Installs the fallback that answers 404/405; call after every route is added. */
  seal(): void {
    this.app.any('/*', (res, req) => {
      const url = req.getUrl();
      const method = req.getMethod();
      const allowed = [...new Set(this.#routes.filter((r) => r.pattern.test(url)).map((r) => r.route.method.toUpperCase()))];
      res.onAborted(() => undefined);
      const err = new EngineError(allowed.length > 0 ? 'ENG_ERR_HTTP_METHOD_NOT_ALLOWED' : 'ENG_ERR_HTTP_NOT_FOUND');
      const reply = this.#errorReply(err);
      // RFC 9110: a 405 names the methods the resource does support.
      if (allowed.length > 0) reply.headers = { ...reply.headers, allow: allowed.join(', ') };
      this.#write(res, reply, false);
      this.#requests.inc({ method, route: 'unmatched', status: err.status });
    });
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      // Without LIBUS_LISTEN_EXCLUSIVE_PORT uSockets sets SO_REUSEPORT: several processes on one host may listen on
      // one port and the kernel spreads new connections among them (docs/operations.md, Several nodes).
      const listen = this.app.listen as unknown as (h: string, p: number, options: number, cb: (token: uWS.us_listen_socket | false) => void) => void;
      listen.call(this.app, host, port, LISTEN_SHARED_PORT, (token) => {
        if (!token) {
          reject(new Error(`could not listen on ${host}:${port}`));
          return;
        }
        this.#listenSocket = token;
        resolve(uWS.us_socket_local_port(token));
      });
    });
  }

  /** Stops accepting connections; resolves when every in-flight request has been answered. */
  async stopListening(): Promise<void> {
    if (this.#listenSocket) {
      uWS.us_listen_socket_close(this.#listenSocket);
      this.#listenSocket = undefined;
    }
    // Streamed answers never finish on their own: end them so their clients reconnect elsewhere.
    for (const sink of [...this.#streams]) sink.end();
    if (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#idle = resolve));
  }

  #handle(c: Compiled<P>, res: uWS.HttpResponse, req: uWS.HttpRequest): void {
    const started = process.hrtime.bigint();
    // uWS invalidates req after this callback returns: copy what we need now.
    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = v;
    });
    const params: Record<string, string> = {};
    c.paramNames.forEach((name, i) => {
      params[name] = decodeURIComponent(req.getParameter(i) ?? '');
    });
    const rawQuery = req.getQuery() ?? '';
    const remoteAddress = Buffer.from(res.getRemoteAddressAsText()).toString();
    const state: RequestState = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
      state.onAbort?.();
    });
    this.#inFlight++;
    void this.#run(c, res, headers, params, rawQuery, remoteAddress, state).then(
      (status) => this.#finish(c, started, status),
      () => this.#finish(c, started, 0),
    );
  }

  #finish(c: Compiled<P>, started: bigint, status: number): void {
    this.#inFlight--;
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    this.#duration.observe({ method: c.route.method, route: c.route.path }, seconds);
    this.#requests.inc({ method: c.route.method, route: c.route.path, status });
    if (this.#inFlight === 0 && this.#idle) {
      const idle = this.#idle;
      this.#idle = undefined;
      idle();
    }
  }

  /** Runs one request to its answer; returns the status written. */
  async #run(
    c: Compiled<P>,
    res: uWS.HttpResponse,
    headers: Record<string, string>,
    params: Record<string, string>,
    rawQuery: string,
    remoteAddress: string,
    state: RequestState,
  ): Promise<number> {
    const route = c.route;
    let extraHeaders: Record<string, string> | undefined;
    let reply: Reply;
    let closeConnection = false;
    let ticket: Ticket | undefined;
    try {
      let raw: Buffer | undefined;
      const length = headers['content-length'];
      const hasBody = BODY_METHODS.has(route.method) && ((length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined);
      if (hasBody) {
        const limit = route.maxBodyBytes ?? this.#opts.maxBodyBytes;
        if (length !== undefined && Number(length) > limit) {
          // Refuse before reading a byte, and close: the client may still be sending.
          closeConnection = true;
          throw new EngineError('ENG_ERR_HTTP_BODY_TOO_LARGE', { limit });
        }
        try {
          raw = await readBody(res, limit);
        } catch (err) {
          if (!(err instanceof BodyTooLarge)) throw err;
          closeConnection = true;
          throw new EngineError('ENG_ERR_HTTP_BODY_TOO_LARGE', { limit });
        }
      }
      const auth = await this.#opts.authenticate(route.auth, headers, route, remoteAddress);
      extraHeaders = auth.headers;
      const version = auth.dataVersion;
      if (route.guard) await route.guard(auth.principal, version?.token);
      if (route.cacheable) {
        // The answer depends on nothing else: the same path and raw query once answered 200, so validation would pass again.
        const found = this.#responses.lookup(version, route.operationId, c.paramNames.map((n) => params[n]!), rawQuery);
        if (found !== undefined && 'body' in found) {
          if (state.aborted) return 499;
          this.#send(res, 200, found.body, 'application/json', found.headers ? { ...extraHeaders, ...found.headers } : extraHeaders, false);
          return 200;
        }
        ticket = found;
      }
      const query = c.query ? c.query(parseQuery(rawQuery)) : parseQuery(rawQuery);
      let body: unknown;
      if (c.body) {
        body = this.#parseJson(raw);
        body = c.body(body);
      }
      reply = await route.handler({ params, query, body, auth: auth.principal, headers, ...(raw === undefined ? {} : { raw }) });
    } catch (err) {
      reply = this.#errorReply(err);
    }
    if (ticket !== undefined && isPlainJson(reply)) {
      const bytes = Buffer.from(reply.json ?? JSON.stringify(reply.body));
      this.#responses.keep(ticket, bytes, reply.headers);
      if (state.aborted) return 499;
      this.#send(res, 200, bytes, 'application/json', reply.headers ? { ...extraHeaders, ...reply.headers } : extraHeaders, false);
      return 200;
    }
    if (state.aborted) {
      // A stream function always runs, so what it holds for the stream is released even when the client left first.
      reply.stream?.(CLOSED_SINK);
      return 499;
    }
    if (extraHeaders) reply.headers = { ...extraHeaders, ...reply.headers };
    if (reply.stream) {
      this.#stream(res, reply, state);
      return reply.status ?? 200;
    }
    this.#write(res, reply, closeConnection);
    return reply.status ?? 200;
  }

  #parseJson(raw: Buffer | undefined): unknown {
    if (raw === undefined || raw.length === 0) {
      throw new EngineError('ENG_ERR_HTTP_VALIDATION', {}, { detail: [{ loc: ['body'], msg: 'Field required', type: 'missing' }] });
    }
    try {
      return JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw new EngineError('ENG_ERR_HTTP_VALIDATION', {}, {
        detail: [{ loc: ['body', jsonErrorPosition(err)], msg: 'JSON decode error', type: 'json_invalid', ctx: { error: 'Expecting value' } }],
      });
    }
  }

  #errorReply(err: unknown): Reply {
    if (isEngineError(err)) {
      return { status: err.status, body: { detail: err.detail }, headers: { 'x-error-code': err.code, ...err.headers } };
    }
    const away = isStoreUnavailable(err) ? 'the store' : isRedisUnavailable(err) ? 'Redis' : undefined;
    if (away !== undefined) {
      const unavailable = new EngineError('ENG_ERR_DEPENDENCY_UNAVAILABLE', { dependency: away });
      this.#opts.logger.warn({ err: { name: (err as Error)?.name, code: (err as { code?: unknown })?.code } }, away === 'Redis' ? 'Redis unavailable: request refused' : 'store unavailable: request refused');
      return { status: unavailable.status, body: { detail: unavailable.detail }, headers: { 'x-error-code': unavailable.code } };
    }
    // Log the error class and stack only: messages of library errors may quote user input.
    this.#opts.logger.error({ err: { name: (err as Error)?.name, stack: (err as Error)?.stack?.split('\n').slice(1, 6).join('\n') } }, 'unhandled error in route');
    const internal = new EngineError('ENG_ERR_INTERNAL');
    return { status: internal.status, body: { detail: internal.detail }, headers: { 'x-error-code': internal.code } };
  }

  #stream(res: uWS.HttpResponse, reply: Reply, state: RequestState): void {
    const listeners: (() => void)[] = [];
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      this.#streams.delete(sink);
      for (const fn of listeners.splice(0)) fn();
    };
    const sink: StreamSink = {
      get closed() {
        return closed;
      },
      write(chunk) {
        if (closed) return false;
        res.cork(() => res.write(chunk));
        return true;
      },
      end() {
        if (closed) return;
        res.cork(() => res.end());
        close();
      },
      onClose(fn) {
        if (closed) fn();
        else listeners.push(fn);
      },
    };
    state.onAbort = close;
    this.#streams.add(sink);
    res.cork(() => {
      res.writeStatus(statusLine(reply.status ?? 200));
      res.writeHeader('content-type', reply.contentType ?? 'text/event-stream');
      res.writeHeader('cache-control', 'no-cache');
      if (reply.headers) for (const [k, v] of Object.entries(reply.headers)) res.writeHeader(k, v);
      // An empty write sends the headers now rather than with the first event.
      res.write('');
    });
    reply.stream!(sink);
  }

  #write(res: uWS.HttpResponse, reply: Reply, closeConnection: boolean): void {
    const status = reply.status ?? 200;
    let payload: string | Buffer | undefined;
    let type: string | undefined;
    if (reply.bytes !== undefined) {
      payload = reply.bytes;
      type = reply.contentType ?? 'application/octet-stream';
    } else if (reply.text !== undefined) {
      payload = reply.text;
      type = reply.contentType ?? 'text/plain; charset=utf-8';
    } else if (reply.json !== undefined && status !== 204) {
      payload = reply.json;
      type = 'application/json';
    } else if (reply.body !== undefined && status !== 204) {
      payload = JSON.stringify(reply.body);
      type = 'application/json';
    }
    this.#send(res, status, payload ?? '', type, reply.headers, closeConnection);
  }

  #send(res: uWS.HttpResponse, status: number, payload: string | Buffer, type: string | undefined, headers: Record<string, string> | undefined, closeConnection: boolean): void {
    res.cork(() => {
      res.writeStatus(statusLine(status));
      if (type) res.writeHeader('content-type', type);
      if (headers) for (const k in headers) res.writeHeader(k, headers[k]!);
      res.end(payload, closeConnection);
    });
  }
}

/** The sink a streamed answer gets when its client left before it began. */
const CLOSED_SINK: StreamSink = { closed: true, write: () => false, end: () => undefined, onClose: (fn) => fn() };

/** A 200 JSON answer (its headers, such as paging, are kept with it): what a cacheable route's answer must be to be kept. */
const isPlainJson = (r: Reply): boolean =>
  (r.status ?? 200) === 200 && (r.body !== undefined || r.json !== undefined) && r.text === undefined && r.stream === undefined;
