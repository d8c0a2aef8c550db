// The MCP endpoints: /v1/mcp/sse (the SSE transport, svc_mcp_ keys only) and the message endpoint it names.
import { EngineError } from '../engine/errors.js';
import type { Principal } from '../engine/identity/authenticator.js';
import type { AppRoute, Services } from './routes/types.js';

type ServerModule = typeof import('./mcp-server.js');

interface McpSession {
  transport: InstanceType<ServerModule['SseTransport']>;
  server: ReturnType<ServerModule['buildServer']>;
  principal: Principal;
}

const MESSAGES_PATH = '/v1/mcp/messages';

export function mcpRoutes(s: Services): AppRoute[] {
  const sessions = new Map<string, McpSession>();
  let mcp: ServerModule | undefined;
  const MessageQuery = { type: 'object', properties: { sessionId: { type: 'string', minLength: 1, maxLength: 64 } }, required: ['sessionId'] } as const;
  return [
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
      responses: { 202: { description: 'accepted; the answer arrives on the event stream' } },
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
