// The delivery log of an owner's webhooks (a user's developer webhooks, an app's webhooks for its owner) and sending
// an ended delivery again. Content-free: ids, states, counts, codes and times, never a body.
import { Type } from '@sinclair/typebox';
import { EngineError } from '../../engine/errors.js';
import { DELIVERY_STATES, type DeliveryRecord, type OwnerKind } from '../../engine/db/deliveries.js';
import { DEVELOPER_WEBHOOK_TYPES } from '../../engine/db/webhooks.js';
import { Limit, Offset, notFound, pagingHeaders, splitPage } from './common.js';
import type { AppRoute, Services } from './types.js';

/** Default `limit` of the delivery log (ours: the compatible system keeps none). */
export const DEFAULT_DELIVERIES_PAGE = 50;
/** Most deliveries one page holds. */
export const MAX_DELIVERIES_PAGE = 200;

const nullable = <T extends ReturnType<typeof Type.String> | ReturnType<typeof Type.Integer>>(t: T) => Type.Union([t, Type.Null()]);

export const DeliverySchema = Type.Object({
  id: Type.String({ description: 'the webhook-id header every attempt of this delivery carried' }),
  event_type: Type.Union(DEVELOPER_WEBHOOK_TYPES.map((x) => Type.Literal(x))),
  subject_id: Type.String({ description: 'the conversation id, the summary date, or the live session id' }),
  state: Type.Union(DELIVERY_STATES.map((x) => Type.Literal(x)), { description: 'pending, retrying, delivered, failed, dropped (a live batch given up on), cancelled (the endpoint was disabled)' }),
  attempts: Type.Integer({ minimum: 0 }),
  last_status_code: nullable(Type.Integer({ description: 'HTTP status of the last answer; null when there was none' })),
  last_error: nullable(Type.String({ description: 'what went wrong without an answer: timeout, connection, refused:<rule>' })),
  latency_ms: nullable(Type.Integer({ description: 'duration of the last attempt' })),
  next_attempt_at: nullable(Type.String({ format: 'date-time' })),
  reprocess: Type.Boolean({ description: 'a conversation-created delivery of a reprocessed conversation' }),
  body_bytes: nullable(Type.Integer({ description: 'size of the body sent' })),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  delivered_at: nullable(Type.String({ format: 'date-time' })),
}, { title: 'WebhookDelivery', description: 'one webhook delivery and its last attempt' });

const ListQuery = Type.Object({ limit: Limit(DEFAULT_DELIVERIES_PAGE, MAX_DELIVERIES_PAGE), offset: Offset() });

function view(d: DeliveryRecord): Record<string, unknown> {
  return {
    id: d.id,
    event_type: d.eventType,
    subject_id: d.subjectId,
    state: d.state,
    attempts: d.attempts,
    last_status_code: d.lastStatus,
    last_error: d.lastError,
    latency_ms: d.lastLatencyMs,
    next_attempt_at: d.nextAttemptAt,
    reprocess: d.reprocess,
    body_bytes: d.bodyBytes,
    created_at: d.createdAt,
    updated_at: d.updatedAt,
    delivered_at: d.deliveredAt,
  };
}

type Req = Parameters<AppRoute['handler']>[0];

export interface DeliveryRoutesOptions {
  /** `/v1/users/developer/webhooks` or `/v1/apps/{app_id}/webhooks`. */
  path: string;
  /** Suffix of the operation ids. */
  name: string;
  whose: string;
  tags: string[];
  /** Whose log the caller reads; undefined answers 404 (an app that is not theirs). */
  owner(req: Req): Promise<{ kind: OwnerKind; id: string } | undefined>;
}

export function deliveryRoutes(s: Services, o: DeliveryRoutesOptions): AppRoute[] {
  const q = s.webhookQueue;
  const ownerOf = async (req: Req): Promise<{ kind: OwnerKind; id: string }> => {
    const owner = await o.owner(req);
    if (!owner) throw notFound('App');
    return owner;
  };
  return [
    {
      method: 'get',
      path: `${o.path}/deliveries`,
      operationId: `list${o.name}Deliveries`,
      summary: `The delivery log of ${o.whose}, newest first; limit ${DEFAULT_DELIVERIES_PAGE} by default, at most ${MAX_DELIVERIES_PAGE} per page`,
      tags: o.tags,
      auth: { kind: 'id_token' },
      query: ListQuery,
      responses: { 200: { description: 'a page of deliveries', schema: Type.Array(DeliverySchema, { title: `${o.name}DeliveryList`, description: 'a page of deliveries, newest first' }) }, 404: { description: 'no such app of yours' } },
      async handler(req) {
        const owner = await ownerOf(req);
        const limit = Math.min(req.query.limit as number, MAX_DELIVERIES_PAGE);
        const rows = await q.deliveries.listForOwner(owner.kind, owner.id, limit + 1, req.query.offset as number);
        const page = splitPage(rows, limit);
        return { body: page.items.map(view), headers: pagingHeaders(`${o.path}/deliveries`.replace(/\{(\w+)\}/g, (_m, k: string) => encodeURIComponent(req.params[k] ?? '')), req.query, limit, page.more) };
      },
    },
    {
      method: 'post',
      path: `${o.path}/deliveries/{delivery_id}/redeliver`,
      operationId: `redeliver${o.name}Delivery`,
      summary: `Send an ended delivery of ${o.whose} again, under the same webhook-id, with a body built now`,
      tags: o.tags,
      auth: { kind: 'id_token' },
      responses: {
        200: { description: 'queued: the delivery is pending again', schema: DeliverySchema },
        404: { description: 'no such delivery of yours' },
        409: { description: 'it is still under way, or it is a live delivery (not kept)' },
      },
      async handler(req) {
        const owner = await ownerOf(req);
        const d = await q.deliveries.get(req.params.delivery_id!);
        if (!d || d.ownerKind !== owner.kind || d.ownerId !== owner.id) throw notFound('Delivery');
        const refused = await q.redeliver(d);
        if (refused === 'in_flight') throw new EngineError('ENG_ERR_WEBHOOK_DELIVERY_IN_FLIGHT');
        if (refused === 'live') throw new EngineError('ENG_ERR_WEBHOOK_DELIVERY_LIVE', { type: d.eventType });
        if (refused === 'not_found') throw notFound('Delivery');
        s.logger.info({ deliveryId: d.id, ownerKind: owner.kind }, 'webhook delivery sent again');
        return { body: view((await q.deliveries.get(d.id))!) };
      },
    },
  ];
}
