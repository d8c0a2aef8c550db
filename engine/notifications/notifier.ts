// The one way a notification reaches a user: a row in their outbox, an event to their open streams on every node
// (Redis pub/sub), and, with FCM configured, a push job per registered device.
import type { RedisClient } from '../redis.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { NotificationInput, NotificationRecord, NotificationsRepository } from '../db/notifications.js';
import type { UserSettingsRepository } from '../db/user-settings.js';
import type { PushQueue } from './push-jobs.js';

/** A notification as the API shows it (list, stream). */
export interface NotificationView {
  id: number;
  title: string;
  body: string;
  data: Record<string, string>;
  source: string;
  app_id: string | null;
  created_at: string;
  read_at: string | null;
}

export const notificationView = (n: NotificationRecord): NotificationView => ({
  id: n.id,
  title: n.title,
  body: n.body,
  data: n.data,
  source: n.source,
  app_id: n.appId,
  created_at: n.createdAt,
  read_at: n.readAt,
});

type Listener = (n: NotificationView) => void;

export interface NotifierOptions {
  notifications: NotificationsRepository;
  settings: UserSettingsRepository;
  publisher: RedisClient;
  /** Shared with other channels: messages are filtered by channel. */
  subscriber: RedisClient;
  channel: string;
  /** Absent without FCM: the outbox and its streams are the only delivery. */
  pushes: PushQueue | undefined;
  clock: Clock;
  logger: Logger;
}

export class Notifier {
  readonly notifications: NotificationsRepository;
  readonly #o: NotifierOptions;
  readonly #listeners = new Map<string, Set<Listener>>();
  #onMessage: ((channel: string, message: string) => void) | undefined;

  constructor(o: NotifierOptions) {
    this.#o = o;
    this.notifications = o.notifications;
  }

  async attach(): Promise<void> {
    this.#onMessage = (channel, message) => {
      if (channel !== this.#o.channel) return;
      let msg: { uid: string; n: NotificationView };
      try {
        msg = JSON.parse(message) as typeof msg;
      } catch {
        return;
      }
      for (const fn of this.#listeners.get(msg.uid) ?? []) fn(msg.n);
    };
    this.#o.subscriber.on('message', this.#onMessage);
    await this.#o.subscriber.subscribe(this.#o.channel);
  }

  /**
   * Records the notification in the user's outbox, tells their open streams, and queues a push to each of their
   * devices when a push service is configured. The outbox row is the notification: a failed publish or enqueue is
   * logged, and the row stays readable.
   */
  async notify(uid: string, input: NotificationInput): Promise<NotificationRecord> {
    const { notifications, settings, publisher, channel, pushes, clock, logger } = this.#o;
    const n = await notifications.add(uid, input, clock.now());
    const fanOut = publisher.publish(channel, JSON.stringify({ uid, n: notificationView(n) })).catch(() => logger.warn({ notificationId: n.id }, 'notification event not published'));
    const push = pushes
      ? settings.tokens(uid).then((tokens) => pushes.add(n.id, tokens.map((t) => t.id))).catch(() => logger.error({ notificationId: n.id }, 'push jobs not queued'))
      : undefined;
    await Promise.all([fanOut, push]);
    return n;
  }

  /** Calls `fn` with each new notification of `uid`, from any node, until the returned function is called. */
  subscribe(uid: string, fn: Listener): () => void {
    let set = this.#listeners.get(uid);
    if (!set) this.#listeners.set(uid, (set = new Set()));
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0 && this.#listeners.get(uid) === set) this.#listeners.delete(uid);
    };
  }

  async close(): Promise<void> {
    if (this.#onMessage) this.#o.subscriber.off('message', this.#onMessage);
    await this.#o.subscriber.unsubscribe(this.#o.channel).catch(() => undefined);
  }
}
