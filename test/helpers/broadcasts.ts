import { expect } from 'vitest';
import type { UserRow } from '../../src/modules/users/users.repository.js';
import { UsersRepository } from '../../src/modules/users/users.repository.js';
import { emptyRow } from '../../src/modules/users/users.service.js';
import type { TestContext } from './context.js';

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** A request of the first account (or of `headers`), JSON body optional. */
export function callAs(t: Pick<TestContext, 'app' | 'auth'>, method: Method, url: string, payload?: unknown, headers: Record<string, string> = t.auth) {
  return t.app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
}

/** A valid draft body, from the platform default sender to a filter audience; `overrides` replace its fields. */
export function draftBody(t: Pick<TestContext, 'deps'>, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: 'March newsletter',
    type: 'newsletter',
    audience: { filter: { 'properties.plan': 'pro' } },
    fromName: 'Clarion News',
    fromAddress: t.deps.config.defaultFromAddress,
    subject: 'What is new in March',
    html: '<p>Hello {{ user.email }}</p>',
    ...overrides,
  };
}

/** Creates a draft (200) and answers it. */
export async function createDraft(t: Pick<TestContext, 'app' | 'auth' | 'deps'>, overrides: Record<string, unknown> = {}, headers?: Record<string, string>): Promise<Record<string, unknown> & { broadcastId: string; status: string }> {
  const res = await callAs(t, 'POST', '/broadcasts', draftBody(t, overrides), headers);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** A user row of the first account's environment, written directly (seeding many users fast). */
export function userRow(t: Pick<TestContext, 'account'>, id: string, fields: Partial<UserRow> = {}): UserRow {
  return { ...emptyRow(t.account.accountId, t.account.clientId, id, '2026-01-01T00:00:00.000Z'), ...fields };
}

export async function seedUsers(t: Pick<TestContext, 'deps'>, rows: UserRow[]): Promise<void> {
  const repo = new UsersRepository(t.deps.db);
  for (let i = 0; i < rows.length; i += 500) await repo.insertManyIfAbsent(rows.slice(i, i + 500));
}

/** A small deterministic PRNG (mulberry32), for generated cases that are the same on every run. */
export function prng(seed: number): { next(): number; pick<T>(items: readonly T[]): T; int(max: number): number } {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let x = state;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  return { next, pick: (items) => items[Math.floor(next() * items.length)], int: (max) => Math.floor(next() * max) };
}
