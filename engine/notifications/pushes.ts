// The push side of a node: with FCM_SERVICE_ACCOUNT_FILE, the `notifications` queue's producer on every node and its
// worker on jobs nodes; without it, nothing (notifications stay in the outbox and its streams).
import type client from 'prom-client';
import type { Config } from '../config.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { NotificationsRepository } from '../db/notifications.js';
import type { UserSettingsRepository } from '../db/user-settings.js';
import { FcmClient } from './fcm.js';
import { PushQueue, PushWorker } from './push-jobs.js';
import { readServiceAccount } from './service-account.js';

export interface Pushes {
  readonly queue: PushQueue | undefined;
  close(): Promise<void>;
}

export function startPushes(o: {
  config: Config;
  redisUrl: string;
  clock: Clock;
  logger: Logger;
  notifications: NotificationsRepository;
  settings: UserSettingsRepository;
  /** This node runs jobs: it sends the pushes. */
  consume: boolean;
  /** Where the worker counts its sends (push_sends_total). */
  registry?: client.Registry;
}): Pushes {
  const { config } = o;
  if (config.fcmServiceAccountFile === undefined) return { queue: undefined, close: async () => undefined };
  const queue = new PushQueue({ redisUrl: o.redisUrl, prefix: config.redisPrefix });
  let worker: PushWorker | undefined;
  if (o.consume) {
    const fcm = new FcmClient({ account: readServiceAccount(config.fcmServiceAccountFile), tokenUrl: config.fcmTokenUrl, baseUrl: config.fcmBaseUrl, clock: o.clock });
    worker = new PushWorker({ redisUrl: o.redisUrl, prefix: config.redisPrefix, fcm, notifications: o.notifications, settings: o.settings, logger: o.logger, ...(o.registry ? { registry: o.registry } : {}) });
  }
  return {
    queue,
    async close() {
      await worker?.close();
      await queue.close();
    },
  };
}
