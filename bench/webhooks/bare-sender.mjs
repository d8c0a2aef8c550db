// The webhooks bench's baseline: what sending alone costs on this box. The same receiver, the same number of kept-alive
// connections and requests in flight, a conversation-created body of the bench's size, signed as the service signs
// (Standard Webhooks headers, HMAC-SHA256); no store, no queue, no retry state.
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { Pool } from 'undici';

/** A conversation-created body like the bench's conversations' (10 segments). */
function body() {
  const now = Date.now();
  return JSON.stringify({
    id: randomUUID(),
    created_at: new Date(now).toISOString(),
    started_at: new Date(now - 60_000).toISOString(),
    finished_at: new Date(now).toISOString(),
    transcript_segments: Array.from({ length: 10 }, (_, k) => ({ text: `segment ${k} of a conversation about the quarterly plan and the offsite`, speaker: `SPEAKER_0${k % 2}`, speakerId: k % 2, speaker_name: null, is_user: k % 2 === 0, start: k * 4, end: k * 4 + 3.8 })),
    structured: { title: '', overview: '', emoji: '🧠', category: 'other', action_items: [], events: [] },
    apps_response: [],
    discarded: false,
  });
}

/**
 * Sends `total` signed POSTs to `port` with `inFlight` at once over as many kept-alive connections; resolves when
 * every answer is read. The caller counts arrivals at the receiver.
 * @param {{ port: number, total: number, inFlight: number }} o
 */
export async function bareSend(o) {
  const pool = new Pool(`http://127.0.0.1:${o.port}`, { connections: o.inFlight, pipelining: 1 });
  const secret = randomBytes(32);
  let next = 0;
  try {
    await Promise.all(Array.from({ length: o.inFlight }, async () => {
      while (next < o.total) {
        next++;
        const id = `msg_${randomUUID()}`;
        const ts = String(Math.floor(Date.now() / 1000));
        const payload = body();
        const signature = createHmac('sha256', secret).update(`${id}.${ts}.${payload}`).digest('base64');
        const r = await pool.request({
          path: '/hook?uid=u0',
          method: 'POST',
          body: payload,
          headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': `v1,${signature}` },
        });
        await r.body.dump();
      }
    }));
  } finally {
    await pool.close();
  }
}
