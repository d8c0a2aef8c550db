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

/** Builds the bodies of a group of deliveries of one event type, in their order (a few reads for the whole group). */
export type GroupBodyBuilder = (ds: readonly DeliveryRecord[]) => Promise<(BuiltBody | undefined)[]>;

/** The body builders of one node, by event type. */
export class WebhookBodies {
  readonly #builders = new Map<WebhookEventType, GroupBodyBuilder>();

  /** A builder of one body at a time; a group of its type builds them side by side. */
  register(eventType: WebhookEventType, builder: BodyBuilder): void {
    this.#builders.set(eventType, (ds) => Promise.all(ds.map(builder)));
  }

  registerGroup(eventType: WebhookEventType, builder: GroupBodyBuilder): void {
    this.#builders.set(eventType, builder);
  }

  /** The bodies of `ds`, in order; undefined where the subject is gone, or no builder is registered for the type. */
  async buildMany(ds: readonly DeliveryRecord[]): Promise<(BuiltBody | undefined)[]> {
    const out: (BuiltBody | undefined)[] = new Array(ds.length).fill(undefined);
    const byType = new Map<WebhookEventType, number[]>();
    ds.forEach((d, i) => {
      const at = byType.get(d.eventType);
      if (at) at.push(i);
      else byType.set(d.eventType, [i]);
    });
    await Promise.all(
      [...byType].map(async ([type, at]) => {
        const builder = this.#builders.get(type);
        if (!builder) return;
        const built = await builder(at.map((i) => ds[i]!));
        at.forEach((i, k) => (out[i] = built[k]));
      }),
    );
    return out;
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

/**
 * Registers the conversation-created builder: the conversations as stored at the first attempt (one read of the
 * group's conversations, one of their segments), `uid` in the query. A conversation's body is built once for all of
 * its endpoints in the group (the user's and each app's get the same bytes).
 */
export function registerConversationCreated(bodies: WebhookBodies, s: Pick<Services, 'conversations'>): void {
  bodies.registerGroup('memory_created', async (ds) => {
    const found = await s.conversations.getManyWithSegments(ds.map((d) => ({ userId: d.uid, id: d.subjectId })));
    const built = new Map<string, string>();
    return ds.map((d) => {
      const c = found.get(d.subjectId);
      if (!c || c.userId !== d.uid) return undefined;
      const key = d.reprocess ? `${d.subjectId}\u0000reprocess` : d.subjectId;
      let body = built.get(key);
      if (body === undefined) built.set(key, (body = JSON.stringify(conversationCreatedBody(c, d.reprocess))));
      return { body, query: { uid: d.uid } };
    });
  });
}
