// Pieces shared by the data routes (conversations, folders, memories, action items, goals): the delete answer, not-found, empty PATCH, UTC times.
import { Type } from '@sinclair/typebox';
import { EngineError, valueError } from '../../engine/errors.js';

export const SuccessSchema = Type.Object({ success: Type.Literal(true) });

export const SUCCESS = { success: true } as const;

/** 404 "<resource> not found", for ids that do not exist and ids of another user alike (existence is never revealed). */
export const notFound = (resource: string): EngineError => new EngineError('ENG_ERR_RESOURCE_NOT_FOUND', { resource });

/** A PATCH must change something: 422 when none of `fields` is present in the body. */
export function requireSomeField(body: Record<string, unknown>, fields: readonly string[]): void {
  if (!fields.some((f) => body[f] !== undefined)) {
    throw valueError(['body'], `At least one of ${fields.join(', ')} must be provided`);
  }
}

/** Normalises a validated ISO 8601 date-time to the UTC form the store holds ("2026-11-23T10:00:00.000Z"). */
export const toUtcIso = (value: string): string => new Date(value).toISOString();
