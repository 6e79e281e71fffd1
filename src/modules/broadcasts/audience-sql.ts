import { type RawBuilder, type SqlBool, sql } from 'kysely';
import type { Dialect } from '../../storage/db.js';
import type { ColumnField, Condition, FieldPath, FilterNode, Scalar } from './audience-filter.js';

/**
 * A filter as a WHERE over `users`, on SQLite or PostgreSQL, with MongoDB's semantics as mingo
 * evaluates them: a comparison matches only a value of the same type (30 is not "30", true is not
 * 1), strings compare by code point (PostgreSQL: COLLATE "C"), a missing field equals null, and
 * $ne / $nin / $not match users that lack the field. Every predicate is built never to be NULL
 * (missing values compare false, not unknown), so NOT inverts it exactly.
 *
 * `exact` is false when the filter holds what SQL does not evaluate here ($regex): `where` is then
 * a superset of the audience (the regex is read as "is a string"), and mingo decides each user
 * that it selects. Under $not and $nor a superset would become a subset, so there the whole
 * clause becomes TRUE.
 */
export interface TranslatedFilter {
  where: RawBuilder<SqlBool>;
  exact: boolean;
}

type Op = 'eq' | 'gt' | 'gte' | 'lt' | 'lte';
const SQL_OP: Record<Op, string> = { eq: '=', gt: '>', gte: '>=', lt: '<', lte: '<=' };
const COLUMNS: Record<ColumnField, string> = { id: 'users.id', email: 'users.email', number: 'users.number', timezone: 'users.timezone', createdAt: 'users.created_at' };

const TRUE = sql<SqlBool>`(1 = 1)`;
const FALSE = sql<SqlBool>`(1 = 0)`;

export function translateFilter(node: FilterNode, dialect: Dialect): TranslatedFilter {
  return new Translator(dialect).node(node);
}

class Translator {
  constructor(private readonly dialect: Dialect) {}

  node(node: FilterNode): TranslatedFilter {
    if (node.kind === 'field') return this.all(node.conditions.map((c) => this.condition(node.path, c)));
    const parts = node.children.map((child) => this.node(child));
    if (node.kind === 'and') return this.all(parts);
    const exact = parts.every((p) => p.exact);
    const any = parts.length === 0 ? FALSE : sql<SqlBool>`(${sql.join(parts.map((p) => p.where), sql` or `)})`;
    if (node.kind === 'or') return { where: any, exact };
    return exact ? { where: sql<SqlBool>`(not ${any})`, exact } : { where: TRUE, exact: false };
  }

  private all(parts: TranslatedFilter[]): TranslatedFilter {
    if (parts.length === 0) return { where: TRUE, exact: true };
    if (parts.length === 1) return parts[0];
    return { where: sql<SqlBool>`(${sql.join(parts.map((p) => p.where), sql` and `)})`, exact: parts.every((p) => p.exact) };
  }

  private condition(path: FieldPath, c: Condition): TranslatedFilter {
    const exact = (where: RawBuilder<SqlBool>): TranslatedFilter => ({ where, exact: true });
    switch (c.op) {
      case 'eq':
        return exact(c.value === null ? not(this.present(path)) : this.compare(path, 'eq', c.value));
      case 'ne':
        return exact(not(c.value === null ? not(this.present(path)) : this.compare(path, 'eq', c.value)));
      case 'gt':
      case 'gte':
      case 'lt':
      case 'lte':
        return exact(this.compare(path, c.op, c.value));
      case 'in':
        return exact(this.member(path, c.values));
      case 'nin':
        return exact(not(this.member(path, c.values)));
      case 'exists':
        return exact(c.value ? this.present(path) : not(this.present(path)));
      case 'regex':
        // Only strings can match: the superset mingo narrows down.
        return { where: this.typed(path, 'string'), exact: false };
      case 'not': {
        const inner = this.all(c.conditions.map((x) => this.condition(path, x)));
        return inner.exact ? exact(not(inner.where)) : { where: TRUE, exact: false };
      }
    }
  }

  private member(path: FieldPath, values: (Scalar | null)[]): RawBuilder<SqlBool> {
    const parts = values.filter((v) => v !== null).map((v) => this.compare(path, 'eq', v));
    if (values.includes(null)) parts.push(not(this.present(path)));
    return parts.length === 0 ? FALSE : balancedOr(parts);
  }

  /** The field holds a value (user columns: not NULL; properties: the key is present). */
  private present(path: FieldPath): RawBuilder<SqlBool> {
    if (path.kind === 'column') return sql<SqlBool>`(${sql.ref(COLUMNS[path.field])} is not null)`;
    return this.dialect === 'postgres'
      ? sql<SqlBool>`(jsonb_typeof(${this.pgValue(path.key)}) is not null)`
      : sql<SqlBool>`(json_type(users.properties, ${sqlitePath(path.key)}) is not null)`;
  }

  /** The field holds a value of this type. */
  private typed(path: FieldPath, type: 'string' | 'number' | 'boolean'): RawBuilder<SqlBool> {
    if (path.kind === 'column') return type === 'string' ? this.present(path) : FALSE;
    if (this.dialect === 'postgres') return sql<SqlBool>`coalesce(jsonb_typeof(${this.pgValue(path.key)}) = ${type}, false)`;
    return sql<SqlBool>`coalesce(json_type(users.properties, ${sqlitePath(path.key)}) in (${sql.join(SQLITE_TYPES[type])}), false)`;
  }

  /** field <op> value, true only for a value of the same type. */
  private compare(path: FieldPath, op: Op, value: Scalar): RawBuilder<SqlBool> {
    const symbol = sql.raw(SQL_OP[op]);
    if (path.kind === 'column') {
      // User columns are strings: anything else never compares.
      if (typeof value !== 'string') return FALSE;
      const column = sql.ref(COLUMNS[path.field]);
      return this.dialect === 'postgres' && op !== 'eq'
        ? sql<SqlBool>`coalesce(${column} collate "C" ${symbol} ${value}::text, false)`
        : sql<SqlBool>`coalesce(${column} ${symbol} ${value}, false)`;
    }
    const type = typeof value as 'string' | 'number' | 'boolean';
    if (this.dialect === 'postgres') {
      const json = this.pgValue(path.key);
      if (op === 'eq') return sql<SqlBool>`coalesce(${json} = ${JSON.stringify(value)}::jsonb, false)`;
      if (type === 'string') {
        return sql<SqlBool>`coalesce(jsonb_typeof(${json}) = 'string' and (users.properties::jsonb ->> ${path.key}::text) collate "C" ${symbol} ${value}::text, false)`;
      }
      // Numbers compare as numbers, booleans false < true: jsonb's own order within one type.
      return sql<SqlBool>`coalesce(jsonb_typeof(${json}) = ${type} and ${json} ${symbol} ${JSON.stringify(value)}::jsonb, false)`;
    }
    const at = sqlitePath(path.key);
    // json_extract answers true and false as 1 and 0: the type check keeps them apart from numbers.
    const operand = typeof value === 'boolean' ? (value ? 1 : 0) : value;
    return sql<SqlBool>`coalesce(json_type(users.properties, ${at}) in (${sql.join(SQLITE_TYPES[type])}) and json_extract(users.properties, ${at}) ${symbol} ${operand}, false)`;
  }

  private pgValue(key: string): RawBuilder<unknown> {
    return sql`(users.properties::jsonb -> ${key}::text)`;
  }
}

const SQLITE_TYPES = { string: ['text'], number: ['integer', 'real'], boolean: ['true', 'false'] } as const;

/** The JSON path of a property key; parseFilter keeps quotes and backslashes out of keys. */
function sqlitePath(key: string): string {
  return `$."${key}"`;
}

function not(where: RawBuilder<SqlBool>): RawBuilder<SqlBool> {
  return sql<SqlBool>`(not ${where})`;
}

/**
 * `a or b or ...` as a balanced tree: SQLite parses a flat chain as a left-deep tree and refuses
 * one deeper than 1,000 (SQLITE_MAX_EXPR_DEPTH), which a $in of 1,000 values (the filter's
 * limit) reached; balanced, its depth is about log2 of the count.
 */
function balancedOr(parts: RawBuilder<SqlBool>[]): RawBuilder<SqlBool> {
  if (parts.length === 1) return parts[0];
  const middle = parts.length >> 1;
  return sql<SqlBool>`(${balancedOr(parts.slice(0, middle))} or ${balancedOr(parts.slice(middle))})`;
}
