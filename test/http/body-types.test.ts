// JSON bodies are validated with their types as sent (src/http/validator.ts): a value of the wrong
// type is a 400 that names it, never coerced into another value and stored. Path and query
// parameters, which are text, are still read as the numbers and booleans their schemas declare.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDraft } from '../helpers/broadcasts.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('JSON body types as sent (%s)', (kind) => {
  let t: TestContext;
  const call = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown) =>
    t.app.inject({ method, url, headers: t.auth, ...(payload !== undefined ? { payload: payload as object } : {}) });

  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t?.close());

  it('a null or a string where a boolean is due does not switch secure mode off', async () => {
    const env = (await call('POST', '/environments', { title: 'Typed' })).json<{ clientId: string }>();
    expect((await call('PATCH', `/environments/${env.clientId}`, { secureMode: true })).statusCode).toBe(200);
    expectErrorBody(await call('PATCH', `/environments/${env.clientId}`, { secureMode: null }), 400, 'VALIDATION_FAILED', /secureMode must be boolean/);
    expectErrorBody(await call('PATCH', `/environments/${env.clientId}`, { secureMode: 'false' }), 400, 'VALIDATION_FAILED', /secureMode must be boolean/);
    expectErrorBody(await call('PATCH', `/environments/${env.clientId}`, { title: 42 }), 400, 'VALIDATION_FAILED', /title must be string/);
    const stored = (await call('GET', '/environments')).json<{ clientId: string; secureMode: boolean; title: string }[]>().find((e) => e.clientId === env.clientId);
    expect(stored).toMatchObject({ secureMode: true, title: 'Typed' });
  });

  it('an array where a string is due creates nothing', async () => {
    const before = (await call('GET', '/environments')).json<unknown[]>().length;
    expectErrorBody(await call('POST', '/environments', { title: ['a'] }), 400, 'VALIDATION_FAILED', /title must be string/);
    expect((await call('GET', '/environments')).json<unknown[]>()).toHaveLength(before);
  });

  it('a null subject is refused, not stored as an empty one; null still clears what may be cleared', async () => {
    const draft = await createDraft(t, { type: 'typed' });
    expectErrorBody(await call('PATCH', `/broadcasts/${draft.broadcastId}`, { subject: null }), 400, 'VALIDATION_FAILED', /subject must be string/);
    expect((await call('GET', `/broadcasts/${draft.broadcastId}`)).json()).toMatchObject({ subject: draft.subject });
    const cleared = await call('PATCH', `/broadcasts/${draft.broadcastId}`, { type: null });
    expect(cleared.statusCode, cleared.body).toBe(200);
    expect(cleared.json<{ type?: string }>().type).toBeUndefined();
  });

  it('a list of ids must be a list of strings', async () => {
    expectErrorBody(await call('POST', '/logs/bulk', { trackingIds: 'abc' }), 400, 'VALIDATION_FAILED', /trackingIds must be array/);
    expectErrorBody(await call('POST', '/logs/bulk', { trackingIds: [1, 2] }), 400, 'VALIDATION_FAILED', /must be string/);
    expect((await call('POST', '/logs/bulk', { trackingIds: ['abc'] })).json()).toEqual({ logs: [] });
  });

  it('push options within the ranges APNs and FCM take: refused before anything is accepted, not bent or sent to fail', async () => {
    const send = (options: unknown) => call('POST', '/send', { type: 'push-options', to: { id: 'push-options' }, mobile_push: { title: 't', message: 'm' }, options });
    for (const [options, field] of [
      [{ apn: { priority: 7 } }, /apn\/priority/],
      [{ apn: { badge: -1 } }, /apn\/badge/],
      [{ apn: { badge: 1.5 } }, /apn\/badge/],
      [{ apn: { expiry: -5 } }, /apn\/expiry/],
      [{ fcm: { android: { ttl: -5 } } }, /android\/ttl/],
      [{ fcm: { android: { ttl: 2_419_201 } } }, /android\/ttl/],
    ] as const) {
      expectErrorBody(await send(options), 400, 'VALIDATION_FAILED', field);
    }
    for (const options of [{ apn: { priority: 5, badge: 0, expiry: 0 } }, { apn: { priority: 1 } }, { fcm: { android: { ttl: 3600 } } }]) {
      const accepted = await send(options);
      expect(accepted.statusCode, accepted.body).toBe(200);
    }
  });

  it('a misspelt required key is named as the likely misspelling, not only as the key that is missing', async () => {
    const typo = await call('POST', '/send', { type: 't', to: { id: 'typo' }, email: { subjec: 'typo', html: 'x' } });
    expectErrorBody(typo, 400, 'VALIDATION_FAILED', /body\/email must have required property 'subject' \(is "subjec" a misspelling of "subject"\?\)$/);
    // Nothing near the missing key: the message stays as it was.
    const missing = await call('POST', '/send', { type: 't', to: { id: 'typo' }, email: { html: 'x' } });
    expectErrorBody(missing, 400, 'VALIDATION_FAILED', /body\/email must have required property 'subject'$/);
  });

  it('query strings and path parameters are still read as their declared types', async () => {
    for (let i = 0; i < 3; i++) await createDraft(t, { name: `q${i}` });
    const page = await call('GET', '/broadcasts?limit=2&archived=false');
    expect(page.statusCode, page.body).toBe(200);
    expect(page.json<{ broadcasts: unknown[] }>().broadcasts).toHaveLength(2);
    expectErrorBody(await call('GET', '/broadcasts?limit=two'), 400, 'VALIDATION_FAILED', /limit/);
  });

  it('a query number that reads as Infinity is refused, not passed to SQL or let past its maximum', async () => {
    const query = (await call('POST', '/logs/query', {})).json<{ queryId: string }>();
    for (const url of ['/logs', '/broadcasts', '/outbox', '/dev-carrier/messages', '/dev-carrier/calls', '/inbound-emails', '/numbers/available?countryCode=US&', `/logs/query/${query.queryId}?`]) {
      for (const limit of ['1e309', 'Infinity', '-Infinity']) {
        const target = url.endsWith('?') || url.endsWith('&') ? `${url}limit=${limit}` : `${url}?limit=${limit}`;
        expectErrorBody(await call('GET', target), 400, 'VALIDATION_FAILED', /limit/);
      }
    }
    expect((await call('GET', '/broadcasts?limit=1e1')).statusCode).toBe(200);
  });
});
