// Conversation events for live sessions over Redis pub/sub, so a job on any node reaches the user's session on this one.
import type { Redis } from 'ioredis';

export const SessionEventType = {
  PROCESSING_STARTED: 'memory_processing_started',
  CREATED: 'memory_created',
} as const;
export type SessionEventType = (typeof SessionEventType)[keyof typeof SessionEventType];

/** Ids only: each node loads the conversation itself. */
export interface SessionEvent {
  type: SessionEventType;
  uid: string;
  conversationId: string;
  /** On memory_created: the conversation had completed before (its owner asked for it to be processed again). */
  reprocess?: boolean;
}

export class SessionEvents {
  readonly #publisher: Redis;
  readonly #subscriber: Redis;
  readonly #channel: string;
  #listener: ((channel: string, message: string) => void) | undefined;

  /** `subscriber` may be shared with other channels: messages are filtered by channel. */
  constructor(opts: { publisher: Redis; subscriber: Redis; channel: string }) {
    this.#publisher = opts.publisher;
    this.#subscriber = opts.subscriber;
    this.#channel = opts.channel;
  }

  async attach(handler: (event: SessionEvent) => void): Promise<void> {
    this.#listener = (channel, message) => {
      if (channel !== this.#channel) return;
      try {
        handler(JSON.parse(message) as SessionEvent);
      } catch {
        // A malformed event is dropped: it can only come from a mismatched deployment.
      }
    };
    this.#subscriber.on('message', this.#listener);
    await this.#subscriber.subscribe(this.#channel);
  }

  async publish(event: SessionEvent): Promise<void> {
    await this.#publisher.publish(this.#channel, JSON.stringify(event));
  }

  async close(): Promise<void> {
    if (this.#listener) this.#subscriber.off('message', this.#listener);
    // Bounded: a subscriber that lost Redis must not hold shutdown (app.ts disconnects it next).
    await Promise.race([this.#subscriber.unsubscribe(this.#channel).catch(() => undefined), new Promise((r) => setTimeout(r, 500).unref())]);
  }
}
