// Webhook signing secrets in the Standard Webhooks form (`whsec_` + base64 of 32 random bytes), one per owner (a user
// for developer webhooks, an app for its webhooks). Rotation keeps the previous secret valid for an overlap window so
// a receiver can switch without losing a delivery; the delivery code signs with every secret `signingSecrets` returns.
import { randomBytes } from 'node:crypto';
import type { WebhookSecretRecord, WebhooksRepository } from '../db/webhooks.js';

/** Secret prefix of the Standard Webhooks specification. */
export const SECRET_PREFIX = 'whsec_';

/** Random bytes in a secret (the specification asks for 24 to 64). */
export const SECRET_BYTES = 32;

/** How long a rotated-out secret still signs deliveries, in milliseconds: 24 hours. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

export type OwnerKind = 'user' | 'app';

export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/** The secrets valid at `now`, newest first: the current one, and the previous one while its overlap lasts. */
export function secretsAt(record: Pick<WebhookSecretRecord, 'secret' | 'previousSecret' | 'previousExpiresAt'> | undefined, now: number): string[] {
  if (!record) return [];
  const out = [record.secret];
  if (record.previousSecret !== null && record.previousExpiresAt !== null && Date.parse(record.previousExpiresAt) > now) out.push(record.previousSecret);
  return out;
}

/** Reading, rotating and signing with an owner's secrets; `now` comes from the caller's (injected) clock. */
export class WebhookSecrets {
  constructor(private readonly repo: WebhooksRepository) {}

  /** The owner's current secret record, created on first read. */
  async get(ownerKind: OwnerKind, ownerId: string, now: number): Promise<WebhookSecretRecord> {
    return (await this.repo.secret(ownerKind, ownerId)) ?? this.repo.ensureSecret(ownerKind, ownerId, generateSecret(), now);
  }

  /** A new current secret; the replaced one signs too until `now + ROTATION_OVERLAP_MS`. */
  async rotate(ownerKind: OwnerKind, ownerId: string, now: number): Promise<WebhookSecretRecord> {
    return this.repo.rotateSecret(ownerKind, ownerId, generateSecret(), now, ROTATION_OVERLAP_MS);
  }

  /**
   * Every secret a delivery for this owner is signed with at `now`, newest first (Standard Webhooks sends one
   * `v1,<signature>` per secret, space-separated). Creates the owner's secret on first use, so a delivery is never
   * unsigned.
   */
  async signingSecrets(ownerKind: OwnerKind, ownerId: string, now: number): Promise<string[]> {
    return secretsAt(await this.get(ownerKind, ownerId, now), now);
  }
}
