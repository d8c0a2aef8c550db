// The webhook pieces a node's routes and delivery code share, built once per node from its services.
import type { Services } from '../services.js';
import { AppsRepository } from '../db/apps.js';
import { WebhooksRepository } from '../db/webhooks.js';
import { DestinationGuard, type Resolver } from './destination.js';
import { WebhookSecrets } from './secrets.js';
import { registerConversationCreated, WebhookBodies } from './bodies.js';
import type { DeliveriesRepository } from '../db/deliveries.js';

export interface WebhookParts {
  readonly apps: AppsRepository;
  readonly webhooks: WebhooksRepository;
  readonly secrets: WebhookSecrets;
  /** Checks every outbound URL, at save and at connect time (WEBHOOK_ALLOW_PRIVATE lifts the private rules). */
  readonly guard: DestinationGuard;
  /** The delivery log and endpoint health. */
  readonly deliveries: DeliveriesRepository;
  /** What each durable event type sends; conversation-created is registered, others register their own builder. */
  readonly bodies: WebhookBodies;
}

const built = new WeakMap<Services, WebhookParts>();

/** The node's parts, built on first use; `o.resolve` (tests) replaces the system resolver of the first build. */
export function webhookParts(s: Services, o: { resolve?: Resolver } = {}): WebhookParts {
  let parts = built.get(s);
  if (!parts) {
    const webhooks = new WebhooksRepository(s.store.knex);
    const bodies = new WebhookBodies();
    registerConversationCreated(bodies, s);
    parts = {
      apps: new AppsRepository(s.store.knex),
      webhooks,
      secrets: new WebhookSecrets(webhooks),
      guard: new DestinationGuard({ allowPrivate: s.config.webhookAllowPrivate, ...(o.resolve ? { resolve: o.resolve } : {}) }),
      deliveries: s.webhookQueue.deliveries,
      bodies,
    };
    built.set(s, parts);
  }
  return parts;
}
