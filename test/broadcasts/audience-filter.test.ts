// The audience filter language: validation (fields, operators, values, depth and size, with the
// path named in the error), and its SQL translation on each engine agreeing with mingo's MongoDB
// semantics, user for user, over a seeded set of users whose properties mix types on purpose
// (30 and "30", true and 1, missing keys, users without properties or email) for a few hundred
// filters: hand-written ones for each rule and generated ones (deterministic PRNG).
import { Query } from 'mingo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { parseFilter } from '../../src/modules/broadcasts/audience-filter.js';
import { filterMatcher, userDocument } from '../../src/modules/broadcasts/audience-match.js';
import { translateFilter } from '../../src/modules/broadcasts/audience-sql.js';
import { AudienceRepository } from '../../src/modules/broadcasts/audience.repository.js';
import type { UserRow } from '../../src/modules/users/users.repository.js';
import { prng, seedUsers, userRow } from '../helpers/broadcasts.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const refused = (filter: unknown): AppError => {
  try {
    parseFilter(filter);
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error(`accepted: ${JSON.stringify(filter)}`);
};

describe('audience filter validation', () => {
  it.each(([
    [{ name: 'x' }, /audience\.filter\.name: "name" is not a field of the user document/],
    [{ 'user.plan': 'x' }, /audience\.filter\.user\.plan: "user\.plan" is not a field of the user document/],
    [{ 'user.': 'x' }, /"user\." is not a field of the user document/],
    [{ 'user.properties.': 1 }, /a property key is 1 to 64 characters/],
    [{ ['properties.' + '\u{1F600}'.repeat(65)]: 1 }, /a property key is 1 to 64 characters/],
    [{ 'properties.a.b': 1 }, /property keys with "\."/],
    [{ 'properties.': 1 }, /a property key is 1 to 64 characters/],
    [{ properties: { plan: 'pro' } }, /"properties" is not a field/],
    [{ email: { $elemMatch: { a: 1 } } }, /audience\.filter\.email\.\$elemMatch: "\$elemMatch" is not an operator/],
    [{ $where: 'this.a' }, /"\$where" is not an operator this filter language has at this level/],
    [{ $expr: { $gt: ['$a', 1] } }, /"\$expr" is not an operator/],
    [{ email: { $eq: 'a', x: 1 } }, /compares with an object/],
    [{ email: { a: 1 } }, /compares with an object/],
    [{ email: {} }, /compares with an object/],
    [{ email: ['a'] }, /must be a string, a finite number or a boolean/],
    [{ 'properties.n': { $gt: null } }, /\$gt must be a string, a finite number or a boolean/],
    [{ 'properties.n': { $in: 'x' } }, /\$in must be an array/],
    [{ 'properties.n': { $in: [{ a: 1 }] } }, /\$in\[0\] must be a string/],
    [{ 'properties.n': { $exists: 1 } }, /\$exists must be true or false/],
    [{ $or: [] }, /\$or must be a non-empty array of filters/],
    [{ $and: { email: 'a' } }, /\$and must be a non-empty array/],
    [{ $nor: ['x'] }, /\$nor\[0\] must be a filter object/],
    [{ email: { $options: 'i' } }, /\$options is allowed only beside \$regex/],
    [{ email: { $regex: '(' } }, /is not a valid regular expression/],
    [{ email: { $regex: '(a)\\1' } }, /linear-time engine \(RE2\) does not run/],
    [{ email: { $regex: 'a(?=b)' } }, /linear-time engine \(RE2\) does not run/],
    [{ email: { $regex: 'a', $options: 'g' } }, /\$options must be a string of the flags i, m and s/],
    [{ email: { $regex: 'a'.repeat(257) } }, /at most 256 are allowed/],
    [{ email: { $regex: 5 } }, /must be a string \(a JavaScript regular expression/],
    [{ email: { $not: 'a' } }, /\$not must be an object of operators/],
    [{ email: 'x'.repeat(1025) }, /at most 1024 are allowed/],
    [[{ email: 'a' }], /audience\.filter must be an object/],
  ] as [unknown, RegExp][]).map(([filter, message]) => [JSON.stringify(filter).slice(0, 80), filter, message] as const))('refuses %s', (_title, filter, message) => {
    const err = refused(filter);
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toMatch(message);
  });

  it('bounds depth, conditions, $in values and size', () => {
    let deep: Record<string, unknown> = { email: 'a' };
    for (let i = 0; i < 9; i++) deep = { $and: [deep] };
    expect(refused(deep).message).toMatch(/nests \$and, \$or, \$nor and \$not more than 8 levels/);
    let notDeep: Record<string, unknown> = { $eq: 1 };
    for (let i = 0; i < 9; i++) notDeep = { $not: notDeep };
    expect(refused({ 'properties.n': notDeep }).message).toMatch(/more than 8 levels/);
    const many = { $or: Array.from({ length: 101 }, (_, i) => ({ [`properties.k${i}`]: i })) };
    expect(refused(many).message).toMatch(/more than 100 conditions/);
    expect(refused({ $or: [{ 'properties.a': { $in: Array.from({ length: 600 }, (_, i) => i) } }, { 'properties.b': { $nin: Array.from({ length: 401 }, (_, i) => i) } }] }).message).toMatch(
      /more than 1000 values in all/,
    );
    expect(refused({ $or: Array.from({ length: 20 }, (_, i) => ({ [`properties.k${i}`]: 'v'.repeat(900) })) }).message).toMatch(/bytes as JSON; at most 16384/);
  });

  it('accepts the language in full: every operator, nested logic, null, regex with flags', () => {
    const filter = {
      email: { $exists: true, $regex: '@example\\.com$', $options: 'i' },
      $or: [{ 'properties.plan': { $in: ['pro', 'team', null] } }, { 'properties.age': { $gte: 18, $lt: 65 } }],
      $nor: [{ timezone: null }, { number: { $ne: '+15005550006' } }],
      createdAt: { $not: { $lte: '2025-01-01' } },
      'properties.vip': { $nin: [false] },
      id: { $gt: 'a' },
    };
    const tree = parseFilter(filter);
    expect(tree.kind).toBe('and');
    expect(tree.kind === 'and' && tree.children).toHaveLength(6);
  });
});

// --- SQL agrees with mingo -----------------------------------------------------------------

const R = prng(20260315);
const PROPERTY_POOLS: Record<string, readonly unknown[]> = {
  age: [30, 31, 17, 65, 64.5, '30', '31', true, 0, -2],
  plan: ['pro', 'Pro', 'free', 'team', '', 1, true],
  vip: [true, false, 'true', 1, 0],
  name: ['Ann', 'ann', 'Émile', 'zoë', 'Zed', 'Bob Smith', '30'],
  score: [1.5, 100, -3, 0, 2, '100'],
};
const COLUMN_POOLS = {
  email: ['ann@example.com', 'Bob@Example.com', 'zed@other.org', 'c@example.com', 'dan@x.io'],
  number: ['+15005550006', '+14155550123', '+33612345678'],
  timezone: ['UTC', 'Europe/Paris', 'America/New_York', 'Asia/Tokyo'],
  createdAt: ['2025-06-01T00:00:00.000Z', '2025-12-31T23:59:59.999Z', '2026-01-15T10:00:00.000Z', '2026-03-01T08:30:00.000Z'],
};

function generatedUsers(t: TestContext): UserRow[] {
  const rows: UserRow[] = [];
  const ids = [...Array.from({ length: 64 }, (_, i) => `u${String(i).padStart(2, '0')}`), 'A', 'a', 'Z', 'zz', 'É'];
  for (const id of ids) {
    const properties: Record<string, unknown> = {};
    for (const [key, pool] of Object.entries(PROPERTY_POOLS)) if (R.next() < 0.65) properties[key] = R.pick(pool);
    const maybe = <T>(pool: readonly T[], p = 0.7) => (R.next() < p ? R.pick(pool) : null);
    rows.push(
      userRow(t, id, {
        email: maybe(COLUMN_POOLS.email, 0.8),
        number: maybe(COLUMN_POOLS.number, 0.5),
        timezone: maybe(COLUMN_POOLS.timezone, 0.6),
        created_at: R.pick(COLUMN_POOLS.createdAt),
        properties: R.next() < 0.1 ? null : JSON.stringify(properties),
      }),
    );
  }
  return rows;
}

const FIELDS = ['id', 'email', 'number', 'timezone', 'createdAt', ...Object.keys(PROPERTY_POOLS).map((k) => `properties.${k}`)];
const ALL_VALUES: readonly unknown[] = [...Object.values(PROPERTY_POOLS).flat(), ...Object.values(COLUMN_POOLS).flat(), 'u10', 'a', 'm'];
const scalarFor = (field: string): unknown => (R.next() < 0.8 && field.startsWith('properties.') ? R.pick(PROPERTY_POOLS[field.slice(11)]) : R.pick(ALL_VALUES));

function generatedCondition(field: string, depth: number): unknown {
  switch (R.int(depth > 1 ? 11 : 12)) {
    case 0:
      return scalarFor(field);
    case 1:
      return { $eq: R.next() < 0.15 ? null : scalarFor(field) };
    case 2:
      return { $ne: R.next() < 0.15 ? null : scalarFor(field) };
    case 3:
    case 4:
      return { [R.pick(['$gt', '$gte', '$lt', '$lte'])]: scalarFor(field) };
    case 5:
      return { $gt: scalarFor(field), $lte: scalarFor(field) };
    case 6:
      return { $in: Array.from({ length: R.int(4) }, () => (R.next() < 0.1 ? null : scalarFor(field))) };
    case 7:
      return { $nin: Array.from({ length: R.int(4) }, () => (R.next() < 0.1 ? null : scalarFor(field))) };
    case 8:
      return { $exists: R.next() < 0.5 };
    case 9:
      return { $regex: R.pick(['^a', 'example', '\\.com$', '^[0-9]+$', 'o', '^$', 'ë']), ...(R.next() < 0.4 ? { $options: 'i' } : {}) };
    case 10:
      return null;
    default: {
      // $not takes operators only: a bare value under it becomes $eq.
      const inner = generatedCondition(field, depth + 1);
      return { $not: inner !== null && typeof inner === 'object' ? inner : { $eq: inner } };
    }
  }
}

function generatedFilter(depth = 0): Record<string, unknown> {
  const filter: Record<string, unknown> = {};
  const parts = 1 + R.int(2);
  for (let i = 0; i < parts; i++) {
    if (depth < 3 && R.next() < 0.3) {
      filter[R.pick(['$and', '$or', '$nor'])] = Array.from({ length: 1 + R.int(3) }, () => generatedFilter(depth + 1));
    } else {
      const field = R.pick(FIELDS);
      filter[field] = generatedCondition(field, 0);
    }
  }
  return filter;
}

const HANDWRITTEN: Record<string, unknown>[] = [
  {},
  { 'properties.age': 30 },
  { 'properties.age': '30' },
  { 'properties.age': { $gt: 25 } },
  { 'properties.age': { $gt: '25' } },
  { 'properties.age': { $lte: true } },
  { 'properties.vip': true },
  { 'properties.vip': 1 },
  { 'properties.vip': { $gt: false } },
  { 'properties.plan': null },
  { 'properties.plan': { $ne: null } },
  { 'properties.plan': { $ne: 'pro' } },
  { 'properties.plan': { $in: ['pro', null] } },
  { 'properties.plan': { $nin: ['pro', 'free'] } },
  { 'properties.plan': { $in: [] } },
  { 'properties.plan': { $nin: [] } },
  { 'properties.name': { $gte: 'Z' } },
  { 'properties.name': { $lt: 'a' } },
  { 'properties.name': { $gt: 'zo' } },
  { 'properties.missing': { $exists: false } },
  { 'properties.score': { $not: { $gt: 0 } } },
  { 'properties.score': { $gte: -3, $lt: 2 } },
  { email: null },
  { email: { $exists: true } },
  { email: { $gt: 'b' } },
  { email: 5 },
  { email: { $ne: 5 } },
  { email: { $regex: '^[a-c]', $options: 'i' } },
  { email: { $not: { $regex: 'example' } } },
  { id: { $in: ['u01', 'A', 'nobody'] } },
  { id: { $gt: 'u5' } },
  { createdAt: { $gte: '2026-01-01' } },
  { timezone: { $in: ['UTC', null] } },
  { number: { $nin: ['+15005550006'] } },
  { $or: [{ 'properties.plan': 'pro' }, { email: { $regex: 'other' } }] },
  { $nor: [{ 'properties.plan': 'pro' }, { 'properties.vip': true }] },
  { $nor: [{ email: { $regex: 'example' } }] },
  { $and: [{ 'properties.age': { $exists: true } }, { 'properties.age': { $not: { $in: [30, 31] } } }] },
  { $and: [{ $or: [{ timezone: 'UTC' }, { timezone: 'Asia/Tokyo' }] }, { $nor: [{ email: null }] }] },
];

describe('audience $regex on values written to make a backtracking engine explode', () => {
  const user = (tag: string) => userRow({ account: { accountId: 'a', clientId: 'e', clientSecret: '', apiKey: '' } }, 'u', { properties: JSON.stringify({ tag }) });

  it('accepts nested and overlapping repetition, and decides a 20,000-character value by RE2', () => {
    for (const pattern of ['^(\\w|\\d)*$', '(a+)+$', '^(a|ab)*c$']) expect(() => parseFilter({ 'properties.tag': { $regex: pattern } })).not.toThrow();
    // JavaScript's RegExp takes 2^n steps on this value (30 characters: about 20 s).
    const overlapping = filterMatcher({ 'properties.tag': { $regex: '^(\\w|\\d)*$' } });
    expect(overlapping(user(`${'1'.repeat(20_000)}!`))).toBe(false);
    expect(overlapping(user('1'.repeat(20_000)))).toBe(true);
    const nested = filterMatcher({ 'properties.tag': { $not: { $regex: '^(a+)+$', $options: 'i' } } });
    expect(nested(user(`${'a'.repeat(20_000)}b`))).toBe(true);
    expect(nested(user('A'.repeat(20_000)))).toBe(false);
  });
});

describe.each(STORAGE_KINDS)('audience filter SQL agrees with mingo (%s)', (kind) => {
  let t: TestContext;
  let users: UserRow[];
  const scope = () => ({ accountId: t.account.accountId, envId: t.account.clientId });

  beforeAll(async () => {
    t = await createTestContext(kind);
    users = generatedUsers(t);
    await seedUsers(t, users);
    // Another environment's users never appear.
    const other = await t.newAccount();
    await seedUsers(t, [userRow({ account: other }, 'u01', { email: 'ann@example.com', properties: '{"age":30,"plan":"pro"}' })]);
  });
  afterAll(() => t?.close());

  const viaMingo = (filter: Record<string, unknown>) => users.filter((u) => new Query(filter, {}).test(userDocument(u))).map((u) => u.id).sort();
  const viaSql = async (filter: Record<string, unknown>) => {
    const translated = translateFilter(parseFilter(filter), kind);
    const rows = await new AudienceRepository(t.deps.db).page(scope(), translated.where, null, 10_000, null);
    // The server's matcher (its $regex run by RE2) against plain mingo's (JavaScript's RegExp).
    const chosen = translated.exact ? rows : rows.filter(filterMatcher(filter));
    return { ids: chosen.map((u) => u.id).sort(), exact: translated.exact, scanned: rows.length };
  };

  it('on hand-written filters, each rule of the semantics', async () => {
    for (const filter of HANDWRITTEN) {
      const expected = viaMingo(filter);
      const got = await viaSql(filter);
      expect(got.ids, JSON.stringify(filter)).toEqual(expected);
      expect(got.exact, JSON.stringify(filter)).toBe(!JSON.stringify(filter).includes('$regex'));
    }
    // The cases discriminate: type bracketing and missing fields pick different users.
    expect(viaMingo({ 'properties.age': 30 })).not.toEqual(viaMingo({ 'properties.age': '30' }));
    expect(viaMingo({ 'properties.plan': { $ne: 'pro' } }).length).toBeGreaterThan(viaMingo({ 'properties.plan': { $exists: true, $ne: 'pro' } }).length);
  });

  it('on 300 generated filters (any field, operator, type and nesting)', async () => {
    let nonTrivial = 0;
    for (let i = 0; i < 300; i++) {
      const filter = generatedFilter();
      parseFilter(filter);
      const expected = viaMingo(filter);
      const got = await viaSql(filter);
      expect(got.ids, JSON.stringify(filter)).toEqual(expected);
      if (expected.length > 0 && expected.length < users.length) nonTrivial++;
      // What SQL leaves to mingo is a superset it narrows, never the missing users.
      if (!got.exact) expect(got.scanned).toBeGreaterThanOrEqual(expected.length);
    }
    expect(nonTrivial).toBeGreaterThan(100);
  });

  it('reads fields written as paths of the user (user.properties.<key>, as the spec names them) as the fields themselves', async () => {
    const pairs: [Record<string, unknown>, Record<string, unknown>][] = [
      [{ 'user.properties.plan': 'pro' }, { 'properties.plan': 'pro' }],
      [
        { $or: [{ 'user.email': { $regex: '^a' } }, { 'user.properties.age': { $gte: 30 } }], 'user.id': { $ne: 'u03' } },
        { $or: [{ email: { $regex: '^a' } }, { 'properties.age': { $gte: 30 } }], id: { $ne: 'u03' } },
      ],
      // The same field under both names: both conditions hold.
      [{ 'properties.age': { $gte: 20 }, 'user.properties.age': { $lt: 40 } }, { 'properties.age': { $gte: 20, $lt: 40 } }],
    ];
    for (const [prefixed, plain] of pairs) {
      const expected = viaMingo(plain);
      expect(expected.length, JSON.stringify(plain)).toBeGreaterThan(0);
      expect(expected.length, JSON.stringify(plain)).toBeLessThan(users.length);
      const matches = filterMatcher(prefixed);
      expect(users.filter(matches).map((u) => u.id).sort(), JSON.stringify(prefixed)).toEqual(expected);
      const translated = translateFilter(parseFilter(prefixed), kind);
      const rows = await new AudienceRepository(t.deps.db).page(scope(), translated.where, null, 10_000, null);
      expect((translated.exact ? rows : rows.filter(matches)).map((u) => u.id).sort(), JSON.stringify(prefixed)).toEqual(expected);
    }
  });

  it('runs $in and $nin of 1,000 values (the limit) as SQL on both engines', async () => {
    const many = (extra: (string | number)[]) => [...Array.from({ length: 1000 - extra.length }, (_, i) => `nobody-${i}`), ...extra];
    for (const filter of [
      { id: { $in: many(['u01', 'u02']) } },
      { 'properties.age': { $in: many([30, 31]) } },
      { 'properties.plan': { $nin: many(['pro']) } },
      { $or: [{ id: { $in: many(['u03']).slice(0, 500) } }, { 'properties.plan': { $in: many(['team']).slice(500) } }] },
    ]) {
      const got = await viaSql(filter);
      expect(got.exact).toBe(true);
      expect(got.ids, JSON.stringify(filter).slice(-80)).toEqual(viaMingo(filter));
    }
  });

  it('narrows a $regex filter in SQL to the users that can match before mingo runs', async () => {
    const filter = { 'properties.plan': 'pro', email: { $regex: 'example', $options: 'i' } };
    const got = await viaSql(filter);
    expect(got.exact).toBe(false);
    expect(got.scanned).toBe(users.filter((u) => u.email !== null && JSON.parse(u.properties ?? '{}').plan === 'pro').length);
    expect(got.ids).toEqual(viaMingo(filter));
  });
});
