import { characterCount } from '../../characters.js';
import { invalid } from '../../errors.js';
import { linearRegex } from './linear-regex.js';

/**
 * The audience filter language (docs/broadcasts.md): a MongoDB-style query over the user
 * document {id, email, number, timezone, createdAt, properties}. parseFilter validates a filter
 * (fields, operators, value types, depth and size) into a tree that audience-sql.ts translates to
 * SQL; the filter itself, once valid, is what mingo evaluates (audience-match.ts), so both read
 * the same query.
 */

export type Scalar = string | number | boolean;

/** A user column, or one key of the user's properties. */
export type FieldPath = { kind: 'column'; field: ColumnField } | { kind: 'property'; key: string };
export type ColumnField = 'id' | 'email' | 'number' | 'timezone' | 'createdAt';

/** One operator applied to a field's value; a field's conditions all hold together. */
export type Condition =
  | { op: 'eq' | 'ne'; value: Scalar | null }
  | { op: 'gt' | 'gte' | 'lt' | 'lte'; value: Scalar }
  | { op: 'in' | 'nin'; values: (Scalar | null)[] }
  | { op: 'exists'; value: boolean }
  | { op: 'regex'; pattern: string; flags: string }
  | { op: 'not'; conditions: Condition[] };

export type FilterNode = { kind: 'and' | 'or' | 'nor'; children: FilterNode[] } | { kind: 'field'; path: FieldPath; conditions: Condition[] };

export const FILTER_LIMITS = {
  /** Nesting of $and/$or/$nor/$not below the top level. */
  depth: 8,
  /** Operators over fields, in all. */
  conditions: 100,
  /** Values of $in and $nin, in all. */
  values: 1000,
  stringLength: 1024,
  regexLength: 256,
  /** The filter as JSON. */
  bytes: 16 * 1024,
} as const;

export const COLUMN_FIELDS: readonly ColumnField[] = ['id', 'email', 'number', 'timezone', 'createdAt'];
/**
 * The spec names filter fields as paths of the user (`user.properties.<key>`); the user document
 * is the filter's root, so `user.` is optional and means nothing more.
 */
const USER_PREFIX = 'user.';

const LOGICAL = ['$and', '$or', '$nor'] as const;
const FIELD_OPERATORS = ['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$exists', '$regex', '$options', '$not'] as const;
const REGEX_FLAGS = /^[ims]*$/;
const PROPERTY_KEY_MAX = 64;

const FIX_FIELDS = `Filter on id, email, number, timezone, createdAt or properties.<key> (each may be written user.<field>), e.g. {"properties.plan": "pro", "createdAt": {"$gte": "2026-01-01"}}.`;
const FIX_OPERATORS = `Use $and, $or, $nor at the top, and ${FIELD_OPERATORS.filter((o) => o !== '$options').join(', ')} (with $options i, m, s) on fields.`;

class Budget {
  conditions = 0;
  values = 0;
}

/**
 * A valid filter with its `user.` prefixes dropped, as mingo reads it against the user document.
 * A field named twice (`email` and `user.email` in one object) keeps both conditions, under $and.
 */
export function withoutUserPrefix(filter: Record<string, unknown>): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  const again: Record<string, unknown>[] = [];
  for (const [key, value] of Object.entries(filter)) {
    if ((LOGICAL as readonly string[]).includes(key)) {
      fields[key] = (value as Record<string, unknown>[]).map(withoutUserPrefix);
      continue;
    }
    const field = key.startsWith(USER_PREFIX) ? key.slice(USER_PREFIX.length) : key;
    if (Object.hasOwn(fields, field)) again.push({ [field]: value });
    else fields[field] = value;
  }
  return again.length === 0 ? fields : { $and: [fields, ...again] };
}

/** Validates `raw` as an audience filter; throws 400 VALIDATION_FAILED naming the offending path. */
export function parseFilter(raw: unknown, path = 'audience.filter'): FilterNode {
  if (!isPlainObject(raw)) throw invalid(`${path} must be an object (a MongoDB-style query over users).`, FIX_FIELDS);
  const bytes = Buffer.byteLength(JSON.stringify(raw), 'utf8');
  if (bytes > FILTER_LIMITS.bytes) throw invalid(`${path} is ${bytes} bytes as JSON; at most ${FILTER_LIMITS.bytes} are allowed.`, 'Use fewer conditions, or an emails audience for a fixed list.');
  return parseQuery(raw, path, 0, new Budget());
}

function parseQuery(query: Record<string, unknown>, path: string, depth: number, budget: Budget): FilterNode {
  const children: FilterNode[] = [];
  for (const [key, value] of Object.entries(query)) {
    const at = `${path}.${key}`;
    if ((LOGICAL as readonly string[]).includes(key)) {
      if (depth + 1 > FILTER_LIMITS.depth) throw tooDeep(at);
      if (!Array.isArray(value) || value.length === 0) throw invalid(`${at} must be a non-empty array of filters.`, `e.g. {"${key}": [{"email": {"$exists": true}}, {"properties.plan": "pro"}]}.`);
      const parts = value.map((item, i) => {
        if (!isPlainObject(item)) throw invalid(`${at}[${i}] must be a filter object.`, FIX_FIELDS);
        return parseQuery(item, `${at}[${i}]`, depth + 1, budget);
      });
      children.push({ kind: key.slice(1) as 'and' | 'or' | 'nor', children: parts });
    } else if (key.startsWith('$')) {
      throw invalid(`${at}: "${key}" is not an operator this filter language has at this level.`, FIX_OPERATORS);
    } else {
      children.push({ kind: 'field', path: parseField(key, at), conditions: parseConditions(value, at, depth, budget) });
    }
  }
  return children.length === 1 ? children[0] : { kind: 'and', children };
}

function parseField(raw: string, at: string): FieldPath {
  const key = raw.startsWith(USER_PREFIX) ? raw.slice(USER_PREFIX.length) : raw;
  if ((COLUMN_FIELDS as readonly string[]).includes(key)) return { kind: 'column', field: key as ColumnField };
  if (key.startsWith('properties.')) {
    const name = key.slice('properties.'.length);
    if (name.length < 1 || characterCount(name) > PROPERTY_KEY_MAX) throw invalid(`${at}: a property key is 1 to ${PROPERTY_KEY_MAX} characters.`, FIX_FIELDS);
    if (/["\\.]/.test(name) || name.startsWith('$')) {
      throw invalid(`${at}: property keys with ".", '"' or "\\", or starting with "$", cannot be filtered on.`, 'Filter on properties whose keys are plain names (letters, digits, _ or -).');
    }
    return { kind: 'property', key: name };
  }
  throw invalid(`${at}: "${raw}" is not a field of the user document.`, FIX_FIELDS);
}

function parseConditions(value: unknown, at: string, depth: number, budget: Budget): Condition[] {
  if (!isPlainObject(value)) return [leaf(budget, at, { op: 'eq', value: scalarOrNull(value, at) })];
  const keys = Object.keys(value);
  if (keys.length === 0 || keys.some((k) => !k.startsWith('$'))) {
    throw invalid(`${at} compares with an object; values are strings, numbers, booleans or null, or an object of operators.`, FIX_OPERATORS);
  }
  const conditions: Condition[] = [];
  for (const key of keys) {
    const operand = value[key];
    const where = `${at}.${key}`;
    switch (key) {
      case '$eq':
      case '$ne':
        conditions.push(leaf(budget, where, { op: key.slice(1) as 'eq' | 'ne', value: scalarOrNull(operand, where) }));
        break;
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte':
        conditions.push(leaf(budget, where, { op: key.slice(1) as 'gt', value: scalar(operand, where) }));
        break;
      case '$in':
      case '$nin': {
        if (!Array.isArray(operand)) throw invalid(`${where} must be an array of values.`, `e.g. {"${key}": ["pro", "team"]}.`);
        budget.values += operand.length;
        if (budget.values > FILTER_LIMITS.values) throw invalid(`${where}: the filter's $in and $nin lists hold more than ${FILTER_LIMITS.values} values in all.`, 'Use an emails audience for a fixed list of recipients.');
        conditions.push(leaf(budget, where, { op: key.slice(1) as 'in' | 'nin', values: operand.map((v, i) => scalarOrNull(v, `${where}[${i}]`)) }));
        break;
      }
      case '$exists':
        if (typeof operand !== 'boolean') throw invalid(`${where} must be true or false.`);
        conditions.push(leaf(budget, where, { op: 'exists', value: operand }));
        break;
      case '$regex':
        conditions.push(leaf(budget, where, regex(operand, value.$options, where)));
        break;
      case '$options':
        if (!('$regex' in value)) throw invalid(`${where} is allowed only beside $regex.`, 'e.g. {"$regex": "^ann", "$options": "i"}.');
        break;
      case '$not': {
        if (depth + 1 > FILTER_LIMITS.depth) throw tooDeep(where);
        if (!isPlainObject(operand) || Object.keys(operand).length === 0 || Object.keys(operand).some((k) => !k.startsWith('$'))) {
          throw invalid(`${where} must be an object of operators, e.g. {"$not": {"$in": ["a", "b"]}}.`, FIX_OPERATORS);
        }
        conditions.push({ op: 'not', conditions: parseConditions(operand, where, depth + 1, budget) });
        break;
      }
      default:
        throw invalid(`${where}: "${key}" is not an operator this filter language has.`, FIX_OPERATORS);
    }
  }
  return conditions;
}

function regex(pattern: unknown, options: unknown, at: string): Condition {
  if (typeof pattern !== 'string') throw invalid(`${at} must be a string (a JavaScript regular expression without slashes).`, 'e.g. {"$regex": "@example\\\\.com$", "$options": "i"}.');
  if (pattern.length > FILTER_LIMITS.regexLength) throw invalid(`${at} is ${pattern.length} characters; at most ${FILTER_LIMITS.regexLength} are allowed.`);
  const flags = options === undefined ? '' : options;
  if (typeof flags !== 'string' || !REGEX_FLAGS.test(flags)) throw invalid(`${at}: $options must be a string of the flags i, m and s.`);
  try {
    new RegExp(pattern, flags);
  } catch (err) {
    throw invalid(`${at} is not a valid regular expression: ${(err as Error).message}.`);
  }
  try {
    linearRegex(pattern, flags);
  } catch (err) {
    throw invalid(
      `${at} uses what the filter's linear-time engine (RE2) does not run: ${(err as Error).message}.`,
      'Write it without lookahead, lookbehind or backreferences (\\1); classes, alternation, repetition and anchors are fine.',
    );
  }
  return { op: 'regex', pattern, flags: [...new Set(flags)].join('') };
}

function leaf(budget: Budget, at: string, condition: Condition): Condition {
  if (++budget.conditions > FILTER_LIMITS.conditions) throw invalid(`${at}: the filter has more than ${FILTER_LIMITS.conditions} conditions.`, 'Use fewer conditions, or an emails audience for a fixed list.');
  return condition;
}

function scalar(value: unknown, at: string): Scalar {
  if (typeof value === 'string') {
    if (value.length > FILTER_LIMITS.stringLength) throw invalid(`${at} is ${value.length} characters; at most ${FILTER_LIMITS.stringLength} are allowed.`);
    return value;
  }
  if (typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) return value;
  throw invalid(`${at} must be a string, a finite number or a boolean.`, FIX_OPERATORS);
}

function scalarOrNull(value: unknown, at: string): Scalar | null {
  return value === null ? null : scalar(value, at);
}

const tooDeep = (at: string) => invalid(`${at}: the filter nests $and, $or, $nor and $not more than ${FILTER_LIMITS.depth} levels deep.`, 'Flatten the filter.');

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
