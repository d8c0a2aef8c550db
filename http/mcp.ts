// The MCP endpoints, svc_mcp_ keys only: /v1/mcp (the Streamable HTTP transport: POST, GET and DELETE on one path,
// sessions named by Mcp-Session-Id) and /v1/mcp/sse (the older SSE transport) with the message endpoint it names.
import { randomUUID } from 'node:crypto';
import { EngineError } from '../engine/errors.js';
import type { Principal } from '../engine/identity/authenticator.js';
import type { Reply, RequestContext, StreamSink } from './adapter.js';
import type { AppRoute, Services } from './routes/types.js';

type ServerModule = typeof import('./mcp-server.js');
type McpServer = ReturnType<ServerModule['buildServer']>;
type StreamableTransport = InstanceType<ServerModule['WebStandardStreamableHTTPServerTransport']>;

interface McpSession {
  transport: InstanceType<ServerModule['SseTransport']>;
  server: McpServer;
  principal: Principal;
}

/** A Streamable HTTP session: lives from its initialize request to DELETE, idle expiry or eviction. */
interface StreamableSession {
  /** Set when the transport takes the initialize request. */
  id: string;
  readonly transport: StreamableTransport;
  readonly server: McpServer;
  readonly keyId: string | undefined;
  /** Clock time of its last request. */
  lastSeen: number;
  /** Requests being answered and streams open; a busy session is never idle. */
  busy: number;
}

const MESSAGES_PATH = '/v1/mcp/messages';
const STREAMABLE_PATH = '/v1/mcp';

/** Streamable HTTP sessions one node keeps; past it a new session is refused with 503. */
export const MAX_SESSIONS = 1000;
/** Streamable HTTP sessions one key keeps; a new one past it ends that key's least recently used (idle first) session. */
export const MAX_SESSIONS_PER_KEY = 20;
/** A session without a request or an open stream for this long is ended; its client gets 404 and starts anew. */
export const SESSION_IDLE_MS = 30 * 60_000;
/** Idle sessions are looked for at most this often, on requests (no timer of its own). */
const SWEEP_EVERY_MS = 60_000;

/** Response headers the adapter writes itself, or that are the connection's business. */
const OWN_HEADERS = new Set(['content-type', 'cache-control', 'connection', 'content-length', 'transfer-encoding']);
/** Request headers not handed to the transport: the body is given whole. */
const HOP_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'host']);

/** A JSON-RPC error without an id, as the transport answers a request it refuses. */
const rpcError = (status: number, code: number, message: string, headers?: Record<string, string>): Reply => ({
  status,
  contentType: 'application/json',
  text: JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }),
  ...(headers ? { headers } : {}),
});

export function mcpRoutes(s: Services): AppRoute[] {
  const sessions = new Map<string, McpSession>();
  const streamable = new Map<string, StreamableSession>();
  let lastSweep = s.clock.now();
  let mcp: ServerModule | undefined;
  const MessageQuery = { type: 'object', properties: { sessionId: { type: 'string', minLength: 1, maxLength: 64 } }, required: ['sessionId'] } as const;

  const end = (session: StreamableSession, why: string): void => {
    if (streamable.get(session.id) === session) streamable.delete(session.id);
    s.logger.debug({ sessionId: session.id, keyId: session.keyId, why }, 'mcp session ended');
    void session.transport.close().catch(() => undefined);
    void session.server.close().catch(() => undefined);
  };

  const sweep = (now: number): void => {
    lastSweep = now;
    for (const session of [...streamable.values()]) {
      if (session.busy === 0 && now - session.lastSeen >= SESSION_IDLE_MS) end(session, 'idle');
    }
  };

  /** Makes room for one more session of this key: its least recently used idle session goes, or else its least recently used. */
  const admit = (keyId: string | undefined): void => {
    let oldestIdle: StreamableSession | undefined;
    let oldest: StreamableSession | undefined;
    let count = 0;
    for (const session of streamable.values()) {
      if (session.keyId !== keyId) continue;
      count++;
      if (!oldest || session.lastSeen < oldest.lastSeen) oldest = session;
      if (session.busy === 0 && (!oldestIdle || session.lastSeen < oldestIdle.lastSeen)) oldestIdle = session;
    }
    const victim = oldestIdle ?? oldest;
    if (count >= MAX_SESSIONS_PER_KEY && victim) end(victim, 'evicted');
  };

  /** Hands a request to the session's transport and its web Response back to the adapter. */
  const bridge = async (session: StreamableSession, method: string, ctx: RequestContext<Principal>): Promise<Reply> => {
    const headers = new Headers();
    for (const [k, v] of Object.entries(ctx.headers)) if (!HOP_HEADERS.has(k)) headers.set(k, v);
    const request = new Request(`http://localhost${STREAMABLE_PATH}`, { method, headers, ...(ctx.raw ? { body: ctx.raw } : {}) });
    session.busy++;
    let settled = false;
    const done = (): void => {
      if (settled) return;
      settled = true;
      session.busy--;
      session.lastSeen = s.clock.now();
    };
    try {
      const response = await session.transport.handleRequest(request);
      const out: Record<string, string> = {};
      response.headers.forEach((v, k) => {
        if (!OWN_HEADERS.has(k)) out[k] = v;
      });
      const type = response.headers.get('content-type');
      if (response.body && type?.startsWith('text/event-stream')) {
        const body = response.body;
        return { status: response.status, contentType: 'text/event-stream', headers: out, stream: (sink) => pump(body, sink, done) };
      }
      const text = await response.text();
      done();
      return text.length > 0 ? { status: response.status, text, contentType: type ?? 'application/json', headers: out } : { status: response.status, headers: out };
    } catch (err) {
      done();
      throw err;
    }
  };

  const streamableHandler = (method: 'POST' | 'GET' | 'DELETE') =>
    async (ctx: RequestContext<Principal>): Promise<Reply> => {
      mcp ??= await import('./mcp-server.js');
      const now = s.clock.now();
      if (now - lastSweep >= SWEEP_EVERY_MS) sweep(now);
      const id = ctx.headers['mcp-session-id'];
      if (id !== undefined) {
        const session = streamable.get(id);
        // Another key's session is as unknown as an ended one.
        if (!session || session.keyId !== ctx.auth.keyId) return rpcError(404, -32001, 'Session not found');
        session.lastSeen = now;
        return bridge(session, method, ctx);
      }
      if (method !== 'POST') return rpcError(400, -32000, 'Bad Request: Mcp-Session-Id header is required');
      // No session yet: only an initialize request opens one, and the transport says so to anything else.
      if (streamable.size >= MAX_SESSIONS) sweep(now);
      if (streamable.size >= MAX_SESSIONS) return rpcError(503, -32000, 'Too many MCP sessions on this node; try again later', { 'retry-after': '60' });
      const { WebStandardStreamableHTTPServerTransport, buildServer } = mcp;
      const server = buildServer(s, ctx.auth);
      const transport: StreamableTransport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sessionId) => {
          admit(ctx.auth.keyId);
          session.id = sessionId;
          streamable.set(sessionId, session);
          s.logger.debug({ sessionId, keyId: ctx.auth.keyId }, 'mcp session opened');
        },
        onsessionclosed: (sessionId) => {
          const ending = streamable.get(sessionId);
          if (ending) end(ending, 'deleted');
        },
      });
      const session: StreamableSession = { id: '', transport, server, keyId: ctx.auth.keyId, lastSeen: now, busy: 0 };
      await server.connect(transport);
      const reply = await bridge(session, method, ctx);
      // Not an initialize request: the transport refused it and no session was opened.
      if (session.id === '') void server.close().catch(() => undefined);
      return reply;
    };

  const streamableRoute = (method: 'post' | 'get' | 'delete', operationId: string, summary: string, responses: AppRoute['responses']): AppRoute => ({
    method,
    path: STREAMABLE_PATH,
    operationId,
    summary,
    tags: ['MCP'],
    auth: { kind: 'mcp_key' },
    ...(responses ? { responses } : {}),
    handler: streamableHandler(method.toUpperCase() as 'POST' | 'GET' | 'DELETE'),
  });

  return [
    streamableRoute('post', 'mcpStreamablePost', 'MCP Streamable HTTP: a JSON-RPC message or batch; an initialize request without Mcp-Session-Id opens a session', {
      200: { description: 'the answers, as application/json or a text/event-stream that ends after the last' },
      202: { description: 'notifications or responses only: accepted' },
      400: { description: 'not JSON-RPC, or no session named: a JSON-RPC error' },
      404: { description: 'the session ended or is not this key\'s: initialize again' },
    }),
    streamableRoute('get', 'mcpStreamableGet', 'MCP Streamable HTTP: the server-to-client event stream of a session', {
      200: { description: 'text/event-stream' },
      400: { description: 'no session named: a JSON-RPC error' },
      404: { description: 'the session ended or is not this key\'s' },
      409: { description: 'the session already has one' },
    }),
    streamableRoute('delete', 'mcpStreamableDelete', 'MCP Streamable HTTP: end a session', {
      200: { description: 'ended' },
      400: { description: 'no session named: a JSON-RPC error' },
      404: { description: 'no such session of this key' },
    }),
    {
      method: 'get',
      path: '/v1/mcp/sse',
      operationId: 'mcpSse',
      summary: 'MCP server-sent-events stream (svc_mcp_ keys only); the first event names the endpoint for client messages',
      tags: ['MCP'],
      auth: { kind: 'mcp_key' },
      responses: { 200: { description: 'text/event-stream' } },
      async handler({ auth }) {
        mcp ??= await import('./mcp-server.js');
        const { SseTransport, buildServer } = mcp;
        return {
          contentType: 'text/event-stream',
          stream: (sink) => {
            const transport = new SseTransport(sink, MESSAGES_PATH);
            const server = buildServer(s, auth);
            sessions.set(transport.sessionId, { transport, server, principal: auth });
            sink.onClose(() => {
              sessions.delete(transport.sessionId);
              void server.close().catch(() => undefined);
            });
            server.connect(transport).catch(() => sink.end());
          },
        };
      },
    },
    {
      method: 'post',
      path: MESSAGES_PATH,
      operationId: 'mcpMessage',
      summary: 'A JSON-RPC message for an open MCP session (the same svc_mcp_ key that opened it)',
      tags: ['MCP'],
      auth: { kind: 'mcp_key' },
      query: MessageQuery as never,
      body: { type: 'object' } as never,
      responses: {
        202: { description: 'accepted; the answer arrives on the event stream' },
        400: { description: 'not a JSON-RPC 2.0 message' },
        404: { description: 'the session ended or is not this key\'s' },
      },
      handler({ auth, query, body }) {
        const session = sessions.get((query as { sessionId: string }).sessionId);
        // Another key's session is as unknown as a closed one.
        if (!session || session.principal.keyId !== auth.keyId || !mcp) throw new EngineError('ENG_ERR_RESOURCE_NOT_FOUND', { resource: 'MCP session' });
        const parsed = mcp.JSONRPCMessageSchema.safeParse(body);
        if (!parsed.success) throw new EngineError('ENG_ERR_HTTP_BAD_REQUEST', { reason: 'Not a JSON-RPC 2.0 message' });
        session.transport.deliver(parsed.data);
        return { status: 202, text: 'Accepted' };
      },
    },
  ];
}

/** Copies a web stream's events to the client until either ends; `done` runs once, when it does. */
function pump(body: ReadableStream<Uint8Array>, sink: StreamSink, done: () => void): void {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  // A comment first: the client learns the stream is open now, not with its first event (an idle GET has none).
  sink.write(': open\n\n');
  sink.onClose(() => {
    // The client went away (or shutdown ended the answer): the transport forgets the stream.
    void reader.cancel().catch(() => undefined);
    done();
  });
  void (async () => {
    try {
      for (;;) {
        const { value, done: finished } = await reader.read();
        if (finished) break;
        if (!sink.write(decoder.decode(value, { stream: true }))) break;
      }
    } catch {
      // A cancelled or failed stream ends the answer like a finished one.
    }
    sink.end();
  })();
}
