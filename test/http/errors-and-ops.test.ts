import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { buildServices } from '../../src/services.js';
import { buildDeps } from '../../src/deps.js';
import type { App } from '../../src/http/types.js';
import { createAccountWithEnvironment } from '../../src/modules/accounts/bootstrap.js';
import { Secrets } from '../../src/secrets.js';
import { testConfig } from '../helpers/context.js';
import { STORAGE_KINDS, type TestStorage, createTestStorage } from '../helpers/storage.js';
import { randomBytes } from 'node:crypto';

describe.each(STORAGE_KINDS)('errors, logs and operations (%s)', (kind) => {
  let app: App;
  let storage: TestStorage;
  let apiKey: string;
  let clientSecret: string;
  const lines: Record<string, unknown>[] = [];
  const auth = () => ({ authorization: `Bearer ${apiKey}` });

  beforeAll(async () => {
    storage = await createTestStorage(kind);
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const deps = buildDeps(testConfig({ bodyLimitBytes: 2048 }), {
      storage,
      logger: pino({ level: 'info' }, sink),
      secrets: new Secrets(randomBytes(32)),
    });
    app = await buildApp(deps, buildServices(deps));
    const created = await createAccountWithEnvironment(deps, { name: 'Errors' });
    apiKey = created.apiKey;
    clientSecret = created.clientSecret;
  });
  afterAll(async () => {
    await app.close();
    await storage.destroy().catch(() => undefined);
  });

  it('answers an unknown route with the Error body', async () => {
    const res = await app.inject({ method: 'GET', url: '/no/such/route', headers: auth() });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ error: { code: 'ROUTE_NOT_FOUND' } });
    expect(res.json().trackingId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("says why the pingram SDK's operations of the hosted service and the voice operations are not served", async () => {
    for (const [method, url] of [
      ['GET', '/account/organization'],
      ['POST', '/account/supabase/configure'],
      ['POST', '/billing'],
      ['GET', '/organization/usage/history'],
      ['DELETE', '/members/someone'],
      ['POST', '/profile/accept_invite'],
      ['POST', '/insights'],
      ['POST', '/editor/token'],
    ] as const) {
      const res = await app.inject({ method, url, headers: auth() });
      expect(res.statusCode, url).toBe(404);
      expect(res.json().error, url).toMatchObject({ code: 'ROUTE_NOT_FOUND', fix: expect.stringContaining('not part of self-hosted Clarion') });
    }
    const voice = await app.inject({ method: 'POST', url: '/voice/call', headers: auth() });
    expect(voice.json().error).toMatchObject({ code: 'ROUTE_NOT_FOUND', fix: expect.stringContaining('voice operations') });
    // Only whole segments: a path that merely starts with the same letters is an ordinary miss.
    for (const url of ['/membership', '/insightsx', '/no/such/route']) {
      const res = await app.inject({ method: 'GET', url, headers: auth() });
      expect(res.json().error.fix, url).toBe('See /openapi.json for the available routes.');
    }
  });

  it('answers invalid JSON with INVALID_JSON', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/environments',
      headers: { ...auth(), 'content-type': 'application/json' },
      payload: '{"title": ',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('INVALID_JSON');
  });

  it('refuses prototype-poisoning JSON and accepts an empty JSON body on DELETE', async () => {
    const poisoned = await app.inject({
      method: 'POST',
      url: '/environments',
      headers: { ...auth(), 'content-type': 'application/json' },
      payload: '{"title":"x","__proto__":{"admin":true}}',
    });
    expect(poisoned.statusCode).toBe(400);
    expect(poisoned.json().error.code).toBe('INVALID_JSON');
    const created = (await app.inject({ method: 'POST', url: '/keys', headers: auth(), payload: { name: 'tmp' } })).json();
    const del = await app.inject({ method: 'DELETE', url: `/keys/${created.id}`, headers: { ...auth(), 'content-type': 'application/json' } });
    expect(del.statusCode).toBe(200);
  });

  it('reads a JSON body sent without Content-Type (as in-app clients do)', async () => {
    const res = await app.inject({ method: 'POST', url: '/environments', headers: auth(), payload: Buffer.from('{"title":"no header"}') });
    expect(res.statusCode).toBe(200);
    expect(res.json().title).toBe('no header');
  });

  it('answers an oversize body with 413 PAYLOAD_TOO_LARGE', async () => {
    const res = await app.inject({ method: 'POST', url: '/environments', headers: auth(), payload: { title: 'x'.repeat(5000) } });
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('logs each request with its trackingId and never the credentials', async () => {
    const basic = `Basic ${Buffer.from(`someclient:${clientSecret}`).toString('base64')}`;
    const res = await app.inject({ method: 'GET', url: '/keys', headers: { authorization: basic } });
    expect(res.statusCode).toBe(401);
    const trackingId = res.json().trackingId;
    const forRequest = lines.filter((l) => l.trackingId === trackingId);
    expect(forRequest.some((l) => (l.res as { statusCode?: number } | undefined)?.statusCode === 401)).toBe(true);
    const all = JSON.stringify(lines);
    expect(all).not.toContain(apiKey);
    expect(all).not.toContain(clientSecret);
  });

  it('reports health with a storage check, Prometheus metrics and the OpenAPI document', async () => {
    const status = await app.inject({ method: 'GET', url: '/status' });
    expect(status.statusCode).toBe(200);
    expect(status.json()).toEqual({ message: 'OK', storage: kind });

    await app.inject({ method: 'GET', url: '/account', headers: auth() });
    const metrics = await app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.headers['content-type']).toContain('text/plain');
    expect(metrics.body).toMatch(/clarion_http_requests_total\{method="GET",route="\/account",status="200"\} [1-9]/);
    expect(metrics.body).toContain('clarion_http_request_duration_seconds_bucket{le="0.005",method="GET",route="/account"}');

    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.paths['/environments/{clientId}'].patch.requestBody).toBeDefined();
    expect(doc.paths['/account'].get.responses['200']).toBeDefined();
    expect(doc.paths['/status'].get.security).toEqual([]);
  });

  it('hides internal details of a 500, and /status answers 503 when storage is gone', async () => {
    await storage.close();
    const res = await app.inject({ method: 'GET', url: '/account', headers: auth() });
    expect(res.statusCode).toBe(500);
    expect(res.json().error.code).toBe('INTERNAL_ERROR');
    expect(res.body).not.toMatch(/sqlite|postgres|pool|stack|at /i);
    const trackingId = res.json().trackingId;
    expect(lines.some((l) => l.trackingId === trackingId && l.level === 50)).toBe(true);

    const status = await app.inject({ method: 'GET', url: '/status' });
    expect(status.statusCode).toBe(503);
    expect(status.json().error.code).toBe('SERVICE_UNAVAILABLE');
  });
});
