// The listen WebSocket's uWS adapter: upgrade (query + ID token), then frames in and out of a SessionActor. The only uWS code of the live path.
import { randomUUID } from 'node:crypto';
import uWS from 'uWebSockets.js';
import type { Logger } from '../logger.js';
import type { Authenticator } from '../identity/authenticator.js';
import { isEngineError } from '../errors.js';
import { CloseCode } from '../protocol.js';
import type { ActorRegistry } from './actor-registry.js';
import type { SendResult, SessionActor, SessionSocket } from './session-actor.js';
import { parseListenQuery, type ListenParams } from './listen-query.js';

export const LISTEN_PATH = '/v4/listen';

export interface ListenServerOptions {
  authenticator: Authenticator;
  registry: ActorRegistry;
  /** Builds (but does not start) the actor for an accepted session. */
  createActor: (ctx: { sessionId: string; params: ListenParams; socket: SessionSocket }) => SessionActor;
  logger: Logger;
  /**
   * Largest client message, in bytes: an audio frame is far below it, a batch of frames still fits. A larger audio
   * frame is skipped, a larger text message closes the session with 1009.
   * @defaultValue 65536 (64 KiB)
   */
  maxPayloadBytes?: number;
  /**
   * Largest message uWS reads in full (its `maxPayloadLength`), so that one just over `maxPayloadBytes` can be answered;
   * a larger one is refused from its header, unread, and the connection dropped. Bounds each socket's buffering.
   * @defaultValue 262144 (256 KiB)
   */
  maxReadBytes?: number;
  /**
   * Bytes uWS buffers for a client that does not read before send() reports 'dropped'.
   * @defaultValue 1048576 (1 MiB)
   */
  maxBackpressureBytes?: number;
  /** Told of each audio frame, to pace the event loop under load (engine/runtime/loop-pacer.ts). */
  pacer?: { note(): void };
  /** Told of each message over `maxPayloadBytes`: its kind (`unknown` when dropped unread) and what became of it. */
  onOversized?: (kind: OversizedKind, outcome: OversizedOutcome) => void;
}

export type OversizedKind = 'binary' | 'text' | 'unknown';
/** `skipped`: an audio frame, the session goes on; `closed`: a text message, close 1009; `dropped`: too big to read. */
export type OversizedOutcome = 'skipped' | 'closed' | 'dropped';

/** What uWS hands the close handler when it refused a message over `maxPayloadLength` (code 1006). */
const UWS_TOO_BIG = 'Received too big message';

/**
 * One socket's state, shared by the upgrade that opens it and its handlers: uWS copies UserData's fields onto the
 * socket object, so the upgrade keeps its own reference to this object, not to UserData.
 */
interface Link {
  sessionId: string;
  params: ListenParams;
  ws?: uWS.WebSocket<UserData>;
  closed: boolean;
  /** Audio frames skipped as too big; the first is logged. */
  skipped: number;
}

interface UserData {
  link: Link;
  /** The session's actor, once it started: on the socket itself, so a frame reaches it without fetching the link. */
  actor?: SessionActor;
}

/** Close reasons are at most 123 bytes (RFC 6455). */
export function closeReason(reason: string): string {
  const b = Buffer.from(reason, 'utf8');
  return b.length <= 123 ? reason : b.subarray(0, 123).toString('utf8').replace(/\uFFFD+$/, '');
}

function reject(res: uWS.HttpResponse, status: string, detail: string, extra: Record<string, string> = {}): void {
  res.cork(() => {
    res.writeStatus(status).writeHeader('content-type', 'application/json');
    for (const [k, v] of Object.entries(extra)) res.writeHeader(k, v);
    res.end(JSON.stringify({ detail }));
  });
}

/** Registers `/v4/listen` on `app`; call before the HTTP adapter's catch-all is installed (seal()). */
export function attachListen(app: uWS.TemplatedApp, o: ListenServerOptions): void {
  const pacer = o.pacer;
  const maxPayload = o.maxPayloadBytes ?? 64 * 1024;
  const maxRead = Math.max(maxPayload, o.maxReadBytes ?? 256 * 1024);
  /**
   * A message over the limit. An audio frame is skipped like a corrupt one: the audio before and after it is still
   * transcribed, where closing would cost the device a reconnect and loop on a client that always batches too much.
   * A text message is the app's own control message (an assignment, a transcript, a photo part): losing it silently
   * would leave the app believing it applied, so the session closes and says why.
   */
  const oversized = (ws: uWS.WebSocket<UserData>, link: Link, bytes: number, isBinary: boolean): void => {
    if (isBinary) {
      o.onOversized?.('binary', 'skipped');
      if (link.skipped++ === 0) o.logger.warn({ sessionId: link.sessionId, bytes, maxBytes: maxPayload }, 'audio frame over the size limit skipped');
      return;
    }
    if (link.closed) return;
    link.closed = true;
    o.onOversized?.('text', 'closed');
    o.logger.warn({ sessionId: link.sessionId, bytes, maxBytes: maxPayload }, 'text message over the size limit: closing');
    ws.end(CloseCode.MESSAGE_TOO_BIG, closeReason(`message too big: ${bytes} bytes, at most ${maxPayload}`));
  };
  /** Admits the upgraded socket's session, or ends the socket with the reason it was refused. */
  const startSession = (ws: uWS.WebSocket<UserData>, link: Link): void => {
    const admission = o.registry.admit(link.params.uid);
    if (!admission.ok) {
      ws.end(admission.code, closeReason(admission.reason));
      return;
    }
    const socket: SessionSocket = {
      send(message): SendResult {
        if (link.closed) return 'dropped';
        const r = ws.send(message, typeof message !== 'string');
        return r === 1 ? 'ok' : r === 0 ? 'backpressure' : 'dropped';
      },
      end(code, reason) {
        if (link.closed) return;
        link.closed = true;
        ws.end(code, closeReason(reason));
      },
    };
    const actor = o.createActor({ sessionId: link.sessionId, params: link.params, socket });
    ws.getUserData().actor = actor;
    o.registry.add(actor);
    actor.start().catch((err: unknown) => {
      o.logger.error({ sessionId: link.sessionId, err: { name: (err as Error)?.name } }, 'session start threw');
    });
  };

  app.ws<UserData>(LISTEN_PATH, {
    compression: uWS.DISABLED,
    maxPayloadLength: maxRead,
    maxBackpressure: o.maxBackpressureBytes ?? 1024 * 1024,
    // The session enforces its own 90 s inactivity rule (any client message counts), so uWS's idle timer is off.
    idleTimeout: 0,
    sendPingsAutomatically: false,

    upgrade: (res, req, context) => {
      // uWS invalidates req when this callback returns: copy everything first.
      const query = req.getQuery() ?? '';
      const authorization = req.getHeader('authorization');
      const key = req.getHeader('sec-websocket-key');
      const protocol = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      let aborted = false;
      res.onAborted(() => (aborted = true));

      const parsed = parseListenQuery(query);
      if (!parsed.ok) {
        reject(res, '400 Bad Request', parsed.reason);
        return;
      }
      const params = parsed.params;
      const upgrade = (afterCallback: boolean): void => {
        const link: Link = { sessionId: randomUUID(), params, closed: false, skipped: 0 };
        const upgradeNow = (): void => res.upgrade<UserData>({ link }, key, protocol, extensions, context);
        if (!afterCallback) {
          // Inside this callback uWS has corked the socket itself and takes the upgrade as its own.
          upgradeNow();
          if (link.ws) startSession(link.ws, link);
          return;
        }
        // uWS 20.30's cork() reads the upgraded socket as an HTTP response once its callback returns (the socket
        // shrinks in place, so it looks unchanged) and closes it, with no close frame, when the stale bytes it reads
        // say "Connection: close" (a uWebSockets bug, since fixed upstream). Those bytes are freed memory that anything
        // allocated inside the callback may reuse, so `open` only records the socket and the session starts after.
        res.cork(upgradeNow);
        if (link.closed) {
          o.logger.warn({ sessionId: link.sessionId }, 'listen socket closed while upgrading');
          return;
        }
        const ws = link.ws;
        if (ws) ws.cork(() => startSession(ws, link));
      };
      const unauthorized = (): void => reject(res, '401 Unauthorized', 'Invalid authorization token', { 'www-authenticate': 'Bearer' });

      // A device reconnecting with a token verified a moment ago is upgraded now, the way uWS means upgrades to go;
      // a token not seen before is verified first and upgraded in a cork() of its own.
      const known = o.authenticator.knownIdToken(authorization || undefined);
      if (known) {
        if (known.uid === params.uid) upgrade(false);
        else unauthorized();
        return;
      }
      o.authenticator.idToken(authorization || undefined).then(
        (principal) => {
          if (aborted) return;
          if (principal.uid === params.uid) upgrade(true);
          else unauthorized();
        },
        (err: unknown) => {
          if (aborted) return;
          const status = isEngineError(err) && err.status === 401 ? '401 Unauthorized' : '503 Service Unavailable';
          // A device whose account was deleted is told so: signing in again, not retrying, is what helps.
          const why = !status.startsWith('401') ? 'Service temporarily unavailable' : isEngineError(err) && err.code === 'ENG_ERR_AUTH_ACCOUNT_DELETED' ? err.message : 'Invalid or expired token';
          reject(res, status, why, { 'www-authenticate': 'Bearer' });
        },
      );
    },

    open: (ws) => {
      ws.getUserData().link.ws = ws;
    },

    message: (ws, message, isBinary) => {
      const data = ws.getUserData();
      if (message.byteLength > maxPayload) {
        oversized(ws, data.link, message.byteLength, isBinary);
        return;
      }
      const actor = data.actor;
      if (!actor) return;
      // uWS reuses the ArrayBuffer after this callback: onBinary copies what it keeps before returning.
      if (isBinary) {
        pacer?.note();
        actor.onBinary(new Uint8Array(message));
      } else actor.onText(Buffer.from(message).toString('utf8'));
    },

    drain: (ws) => ws.getUserData().actor?.onDrain(),

    close: (ws, code, message) => {
      const data = ws.getUserData();
      if (code === 1006 && message.byteLength === UWS_TOO_BIG.length && Buffer.from(message).toString('latin1') === UWS_TOO_BIG) {
        o.onOversized?.('unknown', 'dropped');
        o.logger.warn({ sessionId: data.link.sessionId, maxBytes: maxRead }, 'message too big to read: connection dropped');
      }
      data.link.closed = true;
      data.actor?.onClientClosed();
    },
  });
}
