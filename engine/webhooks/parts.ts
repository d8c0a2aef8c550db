// The webhook pieces a node's routes and delivery code share, built once per node from its services.
import type { Services } from '../services.js';
import { AppsRepository } from '../db/apps.js';
import { WebhooksRepository } from '../db/webhooks.js';
import { DestinationGuard } from './destination.js';
import { WebhookSecrets } from './secrets.js';

export interface WebhookParts {
  readonly apps: AppsRepository;
  readonly webhooks: WebhooksRepository;
  readonly secrets: WebhookSecrets;
  /** Checks every outbound URL, at save and at connect time (WEBHOOK_ALLOW_PRIVATE lifts the private rules). */
  readonly guard: DestinationGuard;
}

const built = new WeakMap<Services, WebhookParts>();

export function webhookParts(s: Services): WebhookParts {
  let parts = built.get(s);
  if (!parts) {
    const webhooks = new WebhooksRepository(s.store.knex);
    parts = { apps: new AppsRepository(s.store.knex), webhooks, secrets: new WebhookSecrets(webhooks), guard: new DestinationGuard({ allowPrivate: s.config.webhookAllowPrivate }) };
    built.set(s, parts);
  }
  return parts;
}
