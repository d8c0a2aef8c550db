// What a durable delivery sends, built at its first attempt from what the store holds then: a builder per event type.
// Conversation-created is built here; the day summary's builder is registered by the code that makes summaries.
import type { Services } from '../services.js';
import type { DeliveryRecord } from '../db/deliveries.js';
import type { ConversationRecord } from '../db/conversations.js';
import type { WebhookEventType } from './types.js';

export interface BuiltBody {
  /** The JSON sent, exactly these bytes on every attempt. */
  body: string;
  /** Query parameters added to the endpoint's URL (`uid`). */
  query: Record<string, string>;
}

/** Builds a delivery's body; undefined when its subject is gone (the delivery is then cancelled). */
export type BodyBuilder = (d: DeliveryRecord) => Promise<BuiltBody | undefined>;

/** The body builders of one node, by event type. */
export class WebhookBodies {
  readonly #builders = new Map<WebhookEventType, BodyBuilder>();

  register(eventType: WebhookEventType, builder: BodyBuilder): void {
    this.#builders.set(eventType, builder);
  }

  /** Undefined when the subject is gone, or no builder is registered for the type. */
  async build(d: DeliveryRecord): Promise<BuiltBody | undefined> {
    return this.#builders.get(d.eventType)?.(d);
  }
}

/** The conversation-created body, field for field as SPEC lists them; a reprocess adds `"reprocess": true`. */
export function conversationCreatedBody(c: ConversationRecord, reprocess: boolean): Record<string, unknown> {
  return {
    id: c.id,
    created_at: c.createdAt,
    started_at: c.startedAt,
    finished_at: c.finishedAt,
    transcript_segments: (c.segments ?? []).map((s) => ({
      text: s.text,
      speaker: s.speaker,
      speakerId: s.speakerId ?? 0,
      speaker_name: s.isUser ? 'User' : `Speaker ${s.speakerId ?? 0}`,
      is_user: s.isUser,
      start: s.start,
      end: s.end,
    })),
    structured: {
      title: c.title,
      overview: c.overview,
      emoji: c.emoji,
      category: c.category,
      action_items: c.actionItems.map((a) => ({ description: a.description, completed: a.completed })),
      events: c.events,
    },
    apps_response: c.appsResults,
    discarded: c.discarded,
    folder_id: c.folderId,
    folder_name: c.folderName,
    ...(reprocess ? { reprocess: true } : {}),
  };
}

/** Registers the conversation-created builder: the conversation as stored at the first attempt, `uid` in the query. */
export function registerConversationCreated(bodies: WebhookBodies, s: Pick<Services, 'conversations'>): void {
  bodies.register('memory_created', async (d) => {
    const c = await s.conversations.get(d.uid, d.subjectId, { includeSegments: true });
    if (!c) return undefined;
    return { body: JSON.stringify(conversationCreatedBody(c, d.reprocess)), query: { uid: d.uid } };
  });
}
