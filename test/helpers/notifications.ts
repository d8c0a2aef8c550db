// Notification test helpers: an app created and installed through the API, a direct notification, and a server-sent
// event stream of /v1/notifications/stream read with node:http.
import http from 'node:http';
import type { TestService } from './service.js';
import { bearer } from './http.js';

export async function createApp(s: TestService, owner: string, name: string, isPrivate = false): Promise<{ id: string; secret: string }> {
  const res = await s.req('/v1/apps', { method: 'POST', headers: bearer(await s.token(owner)), body: { name, capabilities: [], private: isPrivate } });
  if (res.status !== 200) throw new Error(`app creation failed: ${res.status} ${res.text}`);
  return { id: res.json.id as string, secret: res.json.secret as string };
}

export async function install(s: TestService, uid: string, appId: string): Promise<void> {
  const res = await s.req(`/v1/apps/${appId}/install`, { method: 'POST', headers: bearer(await s.token(uid)) });
  if (res.status !== 200) throw new Error(`install failed: ${res.status} ${res.text}`);
}

export const direct = (s: TestService, appId: string, query: Record<string, string>, headers: Record<string, string> = {}) =>
  s.req(`/v2/integrations/${appId}/notification?${new URLSearchParams(query).toString()}`, { method: 'POST', headers });

/** A server-sent event stream read with node:http, its events parsed as they arrive. */
export interface EventStream {
  events: { id: string; event: string; data: any }[];
  comments: string[];
  status: number;
  contentType: string;
  close(): void;
}

export function openStream(s: TestService, token: string, lastEventId?: string): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...bearer(token), accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) };
    const req = http.get(`${s.url}/v1/notifications/stream`, { headers, agent: false }, (res) => {
      const out: EventStream = { events: [], comments: [], status: res.statusCode ?? 0, contentType: String(res.headers['content-type']), close: () => req.destroy() };
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let end;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const fields: Record<string, string> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) out.comments.push(line.slice(1).trim());
            else {
              const i = line.indexOf(':');
              fields[line.slice(0, i)] = line.slice(i + 1).replace(/^ /, '');
            }
          }
          if (fields.data !== undefined) out.events.push({ id: fields.id ?? '', event: fields.event ?? 'message', data: JSON.parse(fields.data) });
        }
      });
      res.on('error', () => undefined);
      resolve(out);
    });
    req.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err)));
  });
}
