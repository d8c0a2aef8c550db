// The conversation-created seam of the jobs node: a completed conversation enqueues its deliveries, then waits a
// bounded time for the installed apps' first answers, so that their replies ride in the memory_created message the
// user's live sessions get next. A later reply is stored on the conversation all the same, but not pushed.
import type { Services } from '../services.js';
import type { ProcessedListener } from '../jobs/process-conversation.js';
import { OPEN_STATES } from '../db/deliveries.js';

/** The longest a conversation's memory_created waits for its apps' first answers, in milliseconds (real time). */
export const APP_REPLY_WAIT_MS = 3000;

/** How often that wait looks at the delivery log, in milliseconds. */
const REPLY_POLL_MS = 25;

export function conversationCreatedListener(s: Services, waitMs = APP_REPLY_WAIT_MS): ProcessedListener {
  return async (e) => {
    const rows = await s.webhookQueue.enqueueConversationCreated(e.uid, e.conversationId, { reprocess: e.reprocess, discarded: e.discarded });
    const apps = rows.filter((r) => r.ownerKind === 'app').map((r) => r.id);
    const deadline = Date.now() + waitMs;
    while (apps.length > 0 && Date.now() < deadline) {
      const d = await s.webhookQueue.deliveries.get(apps[0]!);
      if (!d || d.attempts > 0 || !OPEN_STATES.includes(d.state)) apps.shift();
      else await new Promise((r) => setTimeout(r, REPLY_POLL_MS));
    }
  };
}
