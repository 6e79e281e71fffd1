import { Context } from 'mingo';
import * as queryOperators from 'mingo/operators/query';
import { Query } from 'mingo/query';
import type { Properties } from '../users/users.types.js';
import { withoutUserPrefix } from './audience-filter.js';
import { linearRegex } from './linear-regex.js';

/** The columns of a user that the filter reads. */
export interface UserFilterColumns {
  id: string;
  email: string | null;
  number: string | null;
  timezone: string | null;
  created_at: string;
  properties: string | null;
}

/** The user document a filter is evaluated on: fields the user does not have are absent (as MongoDB has them). */
// A type, not an interface: mingo takes documents with an index signature.
export type UserDocument = {
  id: string;
  email?: string;
  number?: string;
  timezone?: string;
  createdAt: string;
  properties?: Properties;
};

export function userDocument(row: UserFilterColumns): UserDocument {
  const doc: UserDocument = { id: row.id, createdAt: row.created_at };
  if (row.email !== null) doc.email = row.email;
  if (row.number !== null) doc.number = row.number;
  if (row.timezone !== null) doc.timezone = row.timezone;
  if (row.properties !== null) doc.properties = JSON.parse(row.properties) as Properties;
  return doc;
}

/**
 * mingo's $regex with its RegExp (built by mingo from $regex and $options) run by RE2 instead:
 * the same matches, in time linear in the value (linear-regex.ts).
 */
const linearRegexOperator: typeof queryOperators.$regex = (selector, value, options) => {
  const native = value as RegExp;
  return queryOperators.$regex(selector, linearRegex(native.source, native.flags), options);
};
// The query operators alone (the filter language has no expressions), this $regex in place of
// mingo's: a context merged onto mingo's default one would keep the default's $regex.
const LINEAR_REGEX = Context.init({ query: { ...queryOperators, $regex: linearRegexOperator } });

/**
 * A filter evaluated in memory by mingo (MongoDB's query semantics: type-bracketed comparisons,
 * missing fields equal to null, $ne and $nin matching missing fields). Only for filters that
 * parseFilter accepted: mingo would also run operators this language refuses.
 */
export function filterMatcher(filter: Record<string, unknown>): (row: UserFilterColumns) => boolean {
  const query = new Query(withoutUserPrefix(filter), { context: LINEAR_REGEX });
  return (row) => query.test(userDocument(row));
}
