import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationIdOf } from '../../src/http/operation-ids.js';
import { type TestContext, createTestContext } from '../helpers/context.js';

interface Operation {
  operationId?: string;
  parameters?: { name: string; in: string }[];
  responses: Record<string, { description: string }>;
}
interface OpenApiDocument {
  servers: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, { properties?: Record<string, { properties?: Record<string, unknown> }> }> };
}

describe('operationIdOf', () => {
  it("names an operation the pingram SDK calls with the SDK's method name", () => {
    expect(operationIdOf('POST', '/send')).toBe('send');
    expect(operationIdOf('POST', '/users/:userId')).toBe('identify');
    expect(operationIdOf('GET', '/logs/:trackingIds')).toBe('getLogsByTrackingIds');
    expect(operationIdOf('POST', '/sms')).toBe('sendSms');
  });

  it('names any other by its method and path, a parameter read as "by"', () => {
    expect(operationIdOf('GET', '/outbox/:id/raw')).toBe('getOutboxByIdRaw');
    expect(operationIdOf('POST', '/webhooks/:endpointId/recover')).toBe('postWebhooksByEndpointIdRecover');
    expect(operationIdOf('GET', '/:clientId/users/:userId/notifications/INAPP_WEB')).toBe('getByClientIdUsersByUserIdNotificationsInappWeb');
    expect(operationIdOf('GET', '/settings/email/smtp/')).toBe('getSettingsEmailSmtp');
    expect(operationIdOf('GET', '/')).toBe('getRoot');
  });
});

// The document does not depend on the storage engine: one tier is enough.
describe('the OpenAPI document and the docs page', () => {
  let t: TestContext;
  let doc: OpenApiDocument;
  const operations = () => Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ path, method, op })));

  beforeAll(async () => {
    t = await createTestContext('sqlite');
    doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
  });
  afterAll(() => t.close());

  it('gives every operation its own operationId', () => {
    const ids = operations().map(({ op }) => op.operationId);
    expect(ids.length).toBeGreaterThan(100);
    expect(ids.every((id) => typeof id === 'string' && /^[A-Za-z][A-Za-z0-9]*$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.paths['/send'].post.operationId).toBe('send');
  });

  it('names its shared schemas by their $id, and types the send recipient', () => {
    const names = Object.keys(doc.components.schemas);
    expect(names).toEqual(expect.arrayContaining(['ErrorBody', 'SendBody', 'User']));
    expect(names.filter((name) => /^def-\d+$/.test(name))).toEqual([]);
    const to = doc.components.schemas.SendBody.properties!.to;
    expect(Object.keys(to.properties!)).toEqual(expect.arrayContaining(['id', 'email', 'number', 'pushTokens', 'webPushTokens', 'timezone']));
  });

  it('declares exactly the parameters of each path, and describes every response', () => {
    for (const { path, method, op } of operations()) {
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      const declared = (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name).sort();
      expect(declared, `${method.toUpperCase()} ${path}`).toEqual(inPath);
      for (const response of Object.values(op.responses)) expect(response.description).not.toBe('Default Response');
    }
  });

  it('names this server, or the configured public URL', async () => {
    expect(doc.servers).toEqual([{ url: '/', description: 'this server' }]);
    const other = await createTestContext('sqlite', { config: { publicUrl: 'https://notify.example.test' } });
    try {
      const served = (await other.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      expect(served.servers).toEqual([{ url: 'https://notify.example.test', description: 'CLARION_PUBLIC_URL' }]);
    } finally {
      await other.close();
    }
  });

  it('serves /docs without credentials, its assets from this server', async () => {
    const page = await t.app.inject({ method: 'GET', url: '/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets).toContain('/docs/static/swagger-ui-bundle.js');
    expect(assets.filter((url) => !url.startsWith('/docs/static/'))).toEqual([]);
    const bundle = await t.app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
    expect(bundle.statusCode).toBe(200);
    expect(bundle.headers['content-type']).toContain('javascript');
    const document = await t.app.inject({ method: 'GET', url: '/docs/json' });
    expect(document.json().paths['/send'].post.operationId).toBe('send');
  });
});
