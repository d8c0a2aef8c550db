// JSON Schema validation (TypeBox schemas, ajv) with errors in FastAPI/pydantic's HTTPValidationError shape.
import type { TSchema, Static } from '@sinclair/typebox';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { validationError, type ValidationIssue } from '../engine/errors.js';

// ajv-formats ships CommonJS with a default export property.
const addFormats = (addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule;

function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({ allErrors: true, coerceTypes: coerce, useDefaults: true, strict: false, removeAdditional: false });
  (addFormats as unknown as (a: Ajv) => void)(ajv);
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
      return { loc, msg: `Input should be ${quoteList([p.allowedValue])}`, type: 'literal_error' };
    case 'pattern':
      return { loc, msg: `String should match pattern '${p.pattern}'`, type: 'string_pattern_mismatch' };
    case 'format':
      if (p.format === 'date-time') return { loc, msg: 'Input should be a valid datetime', type: 'datetime_parsing' };
      if (p.format === 'date') return { loc, msg: 'Input should be a valid date', type: 'date_parsing' };
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

/** Maps ajv errors to issues, dropping duplicates that anyOf branches produce. */
export function toIssues(errors: readonly ErrorObject[], where: Location): ValidationIssue[] {
  const seen = new Set<string>();
  const out: ValidationIssue[] = [];
  for (const e of errors) {
    const issue = toIssue(e, where);
    if (!issue) continue;
    const key = JSON.stringify(issue.loc) + issue.type;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(issue);
  }
  return out;
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
