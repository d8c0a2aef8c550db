// JSON Schema validation (TypeBox schemas, ajv) with errors in FastAPI/pydantic's HTTPValidationError shape.
import type { TSchema, Static } from '@sinclair/typebox';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { validationError, type ValidationIssue } from '../engine/errors.js';

// ajv-formats ships CommonJS with a default export property.
const addFormats = (addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule;

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?$/;

const daysIn = (year: number, month: number): number => new Date(Date.UTC(year, month, 0)).getUTCDate();

/**
 * Milliseconds since the epoch of an ISO 8601 date-time ("2026-12-02T09:00:00+01:00", "2026-12-02 09:00Z"), or
 * undefined when it is not one. Without an offset the time is read as UTC, as the compatible system does.
 */
export function parseDateTime(value: string): number | undefined {
  const m = DATE_TIME.exec(value);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '0'].map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 59) return undefined;
  const offsetH = m[10] === undefined ? 0 : Number(m[10]);
  const offsetM = m[11] === undefined ? 0 : Number(m[11]);
  if (offsetH > 23 || offsetM > 59) return undefined;
  const ms = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
  const offset = (m[9] === '-' ? -1 : 1) * (offsetH * 60 + offsetM) * 60_000;
  return Date.UTC(year, month - 1, day, hour, minute, second, ms) - offset;
}

const DATETIME_EXPECTED = 'expected an ISO 8601 date-time such as 2026-12-02T09:00:00Z (read as UTC without an offset)';

function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({ allErrors: true, coerceTypes: coerce, useDefaults: true, strict: false, removeAdditional: false });
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  // Offsets are optional, as for the compatible system's parser: a naive time is UTC.
  ajv.addFormat('date-time', { type: 'string', validate: (v: string) => parseDateTime(v) !== undefined });
  return ajv;
}

// Bodies are strict JSON (no type coercion); query strings arrive as text, so their values are coerced.
const bodyAjv = makeAjv(false);
const queryAjv = makeAjv(true);

export type Location = 'body' | 'query' | 'path';

export interface Validator<T> {
  readonly schema: TSchema;
  /** Returns the value with defaults applied, or throws a 422 EngineError. */
  (value: unknown): T;
}

const caches = { body: new WeakMap<TSchema, ValidateFunction>(), text: new WeakMap<TSchema, ValidateFunction>() };

function quoteList(values: readonly unknown[]): string {
  const quoted = values.map((v) => `'${String(v)}'`);
  return quoted.length <= 1 ? quoted.join('') : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
}

function toIssue(err: ErrorObject, where: Location): ValidationIssue | undefined {
  const loc: (string | number)[] = [where];
  for (const part of err.instancePath.split('/').slice(1)) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    loc.push(/^\d+$/.test(key) ? Number(key) : key);
  }
  const p = err.params as Record<string, unknown>;
  const fromText = where !== 'body';
  switch (err.keyword) {
    case 'required':
      return { loc: [...loc, String(p.missingProperty)], msg: 'Field required', type: 'missing' };
    case 'type': {
      const t = String(p.type);
      if (t.includes('integer')) {
        return fromText
          ? { loc, msg: 'Input should be a valid integer, unable to parse string as an integer', type: 'int_parsing' }
          : { loc, msg: 'Input should be a valid integer', type: 'int_type' };
      }
      if (t.includes('number')) {
        return fromText
          ? { loc, msg: 'Input should be a valid number, unable to parse string as a number', type: 'float_parsing' }
          : { loc, msg: 'Input should be a valid number', type: 'float_type' };
      }
      if (t.includes('boolean')) {
        return fromText
          ? { loc, msg: 'Input should be a valid boolean, unable to interpret input', type: 'bool_parsing' }
          : { loc, msg: 'Input should be a valid boolean', type: 'bool_type' };
      }
      if (t.includes('string')) return { loc, msg: 'Input should be a valid string', type: 'string_type' };
      if (t.includes('array')) return { loc, msg: 'Input should be a valid list', type: 'list_type' };
      if (t.includes('object')) {
        return loc.length === 1
          ? { loc, msg: 'Input should be a valid dictionary or object to extract fields from', type: 'model_attributes_type' }
          : { loc, msg: 'Input should be a valid dictionary', type: 'dict_type' };
      }
      return { loc, msg: `Input should be of type ${t}`, type: 'type_error' };
    }
    case 'minLength':
      return { loc, msg: `String should have at least ${p.limit} character${p.limit === 1 ? '' : 's'}`, type: 'string_too_short', ctx: { min_length: p.limit } };
    case 'maxLength':
      return { loc, msg: `String should have at most ${p.limit} character${p.limit === 1 ? '' : 's'}`, type: 'string_too_long', ctx: { max_length: p.limit } };
    case 'minimum':
      return { loc, msg: `Input should be greater than or equal to ${p.limit}`, type: 'greater_than_equal', ctx: { ge: p.limit } };
    case 'maximum':
      return { loc, msg: `Input should be less than or equal to ${p.limit}`, type: 'less_than_equal', ctx: { le: p.limit } };
    case 'exclusiveMinimum':
      return { loc, msg: `Input should be greater than ${p.limit}`, type: 'greater_than', ctx: { gt: p.limit } };
    case 'exclusiveMaximum':
      return { loc, msg: `Input should be less than ${p.limit}`, type: 'less_than', ctx: { lt: p.limit } };
    case 'minItems':
      return { loc, msg: `List should have at least ${p.limit} item${p.limit === 1 ? '' : 's'} after validation`, type: 'too_short', ctx: { min_length: p.limit } };
    case 'maxItems':
      return { loc, msg: `List should have at most ${p.limit} item${p.limit === 1 ? '' : 's'} after validation`, type: 'too_long', ctx: { max_length: p.limit } };
    case 'enum': {
      const allowed = (p.allowedValues as unknown[]) ?? [];
      return { loc, msg: `Input should be ${quoteList(allowed)}`, type: 'enum', ctx: { expected: quoteList(allowed) } };
    }
    case 'const':
      return { loc, msg: `Input should be ${quoteList([p.allowedValue])}`, type: 'literal_error', ctx: { expected: quoteList([p.allowedValue]), value: p.allowedValue } };
    case 'pattern':
      return { loc, msg: `String should match pattern '${p.pattern}'`, type: 'string_pattern_mismatch' };
    case 'format':
      if (p.format === 'date-time') return { loc, msg: `Input should be a valid datetime, ${DATETIME_EXPECTED}`, type: 'datetime_parsing' };
      if (p.format === 'date') return { loc, msg: 'Input should be a valid date, expected YYYY-MM-DD', type: 'date_parsing' };
      return { loc, msg: `Input should be a valid ${String(p.format)}`, type: 'value_error' };
    case 'additionalProperties':
      return { loc: [...loc, String(p.additionalProperty)], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' };
    case 'anyOf':
    case 'oneOf':
      // The branches already reported their own errors; the umbrella adds nothing a client can act on.
      return undefined;
    default:
      return { loc, msg: err.message ?? 'Invalid value', type: 'value_error' };
  }
}

const NULL_BRANCH = 'Input should be of type null';

const within = (loc: readonly (string | number)[], outer: readonly (string | number)[]): boolean =>
  loc.length >= outer.length && outer.every((part, i) => loc[i] === part);

/** Several issues at one location (the branches of a union, or type and enum together) become the one pydantic reports. */
function oneIssue(issues: ValidationIssue[]): ValidationIssue {
  const first = issues[0]!;
  const enumIssue = issues.find((i) => i.type === 'enum');
  if (enumIssue) return enumIssue;
  const literals = issues.filter((i) => i.type === 'literal_error');
  if (literals.length > 0) {
    const expected = quoteList(literals.map((i) => String(i.ctx?.value)));
    return { loc: first.loc, msg: `Input should be ${expected}`, type: 'literal_error', ctx: { expected } };
  }
  const formats = new Set(issues.map((i) => i.type));
  if (formats.has('datetime_parsing') && formats.has('date_parsing')) {
    return { loc: first.loc, msg: 'Input should be a valid date or datetime, expected YYYY-MM-DD or an ISO 8601 date-time (read as UTC without an offset)', type: 'datetime_parsing' };
  }
  return first;
}

/**
 * Maps ajv errors to issues, one per location as pydantic reports them: the branches of a union collapse into one,
 * and the null branch of a nullable field says nothing when the value failed the field's own schema.
 */
export function toIssues(errors: readonly ErrorObject[], where: Location): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const e of errors) {
    const issue = toIssue(e, where);
    if (issue) issues.push(issue);
  }
  const byLoc = new Map<string, ValidationIssue[]>();
  for (const issue of issues) {
    if (issue.msg === NULL_BRANCH && issues.some((o) => o !== issue && o.msg !== NULL_BRANCH && within(o.loc, issue.loc))) continue;
    const key = JSON.stringify(issue.loc);
    const group = byLoc.get(key);
    if (group) group.push(issue);
    else byLoc.set(key, [issue]);
  }
  return [...byLoc.values()].map(oneIssue);
}

const BOOL_TRUE = new Set(['true', '1', 'yes', 'on', 't', 'y']);
const BOOL_FALSE = new Set(['false', '0', 'no', 'off', 'f', 'n']);

/** FastAPI reads booleans in query strings leniently ("yes", "on", "1"...); ajv alone knows only "true"/"false". */
function normaliseQueryBooleans(schema: TSchema, value: Record<string, unknown>): void {
  const props = (schema as { properties?: Record<string, { type?: unknown }> }).properties;
  if (!props) return;
  for (const [name, prop] of Object.entries(props)) {
    const v = value[name];
    if (prop.type !== 'boolean' || typeof v !== 'string') continue;
    const lower = v.toLowerCase();
    if (BOOL_TRUE.has(lower)) value[name] = true;
    else if (BOOL_FALSE.has(lower)) value[name] = false;
  }
}

/** Compiles a schema once; the returned function validates one location of a request. */
export function compile<S extends TSchema>(schema: S, where: Location): Validator<Static<S>> {
  const ajv = where === 'body' ? bodyAjv : queryAjv;
  const cache = where === 'body' ? caches.body : caches.text;
  let fn = cache.get(schema);
  if (!fn) {
    fn = ajv.compile(schema);
    cache.set(schema, fn);
  }
  const validate = fn;
  const v = ((value: unknown) => {
    if (where !== 'body' && value && typeof value === 'object') normaliseQueryBooleans(schema, value as Record<string, unknown>);
    if (!validate(value)) throw validationError(toIssues(validate.errors ?? [], where));
    return value as Static<S>;
  }) as Validator<Static<S>>;
  Object.defineProperty(v, 'schema', { value: schema });
  return v;
}
