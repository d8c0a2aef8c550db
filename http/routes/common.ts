// Pieces shared by the data routes (conversations, folders, memories, action items, goals): the delete answer, not-found, empty PATCH, enumerations, UTC times, paging.
import { Type, type SchemaOptions, type TUnsafe } from '@sinclair/typebox';
import { EngineError, valueError } from '../../engine/errors.js';
import { parseDateTime } from '../validation.js';

/**
 * A string that is one of `values`, as a JSON Schema `enum`: a wrong value gets one 422 issue naming them all
 * (a union of literals would report one issue per literal), and generated clients get a union type.
 */
export const StringEnum = <const T extends readonly string[]>(values: T, options: SchemaOptions = {}): TUnsafe<T[number]> =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });

export const SuccessSchema = Type.Object({ success: Type.Literal(true) }, { title: 'Success', description: 'the answer of a delete' });

export const SUCCESS = { success: true } as const;

/** 404 "<resource> not found", for ids that do not exist and ids of another user alike (existence is never revealed). */
export const notFound = (resource: string): EngineError => new EngineError('ENG_ERR_RESOURCE_NOT_FOUND', { resource });

/** A PATCH must change something: 422 when none of `fields` is present in the body. */
export function requireSomeField(body: Record<string, unknown>, fields: readonly string[]): void {
  if (!fields.some((f) => body[f] !== undefined)) {
    throw valueError(['body'], `At least one of ${fields.join(', ')} must be provided`);
  }
}

/** A query bound: a day (YYYY-MM-DD, read as UTC) or a date-time (UTC without an offset). */
export const DateBound = (description: string) =>
  Type.Union([Type.String({ format: 'date-time' }), Type.String({ format: 'date' })], { description });

/** A day bound as the UTC instant it stands for: its first millisecond, or its last when `endOfDay`; date-times as they are. */
export function boundToUtcIso(value: string, endOfDay: boolean): string {
  if (/^\d{4}-\d{2}-\d{2}$/.test(value)) return endOfDay ? `${value}T23:59:59.999Z` : `${value}T00:00:00.000Z`;
  return toUtcIso(value);
}

/**
 * Normalises a validated ISO 8601 date-time to the UTC form the store holds ("2026-11-23T10:00:00.000Z"); a time
 * without an offset is UTC.
 */
export const toUtcIso = (value: string): string => new Date(parseDateTime(value) ?? Number.NaN).toISOString();

/**
 * `limit` of a list: any positive number is accepted, as by the compatible system, and a page holds at most `max`
 * items; X-Has-More and Link (rel="next") tell the client whether to ask again (docs/developer-data.md).
 */
export const Limit = (defaultLimit: number, max: number) =>
  Type.Integer({ minimum: 1, default: defaultLimit, description: `items per page; any positive number, but a page holds at most ${max} (X-Has-More and Link tell whether more follow)` });

export const Offset = () => Type.Integer({ minimum: 0, default: 0, description: 'items to skip' });

/**
 * The paging headers of a list answer: `X-Has-More` always; when more follow, a `Link` to the next page (the same
 * query, the offset moved past what was served).
 */
export function pagingHeaders(path: string, query: Readonly<Record<string, unknown>>, served: number, more: boolean): Record<string, string> {
  if (!more) return { 'x-has-more': 'false' };
  const next = new URLSearchParams({ limit: String(query.limit), offset: String(Number(query.offset ?? 0) + served) });
  for (const [name, value] of Object.entries(query)) if (value !== undefined && !next.has(name)) next.set(name, String(value));
  return { 'x-has-more': 'true', link: `<${path}?${next.toString()}>; rel="next"` };
}

/** The first `page` of `rows` (read with one row past the page) and whether more follow. */
export function splitPage<T>(rows: T[], page: number): { items: T[]; more: boolean } {
  return rows.length > page ? { items: rows.slice(0, page), more: true } : { items: rows, more: false };
}
