// Webhook endpoints over HTTP: the spec's multi-endpoint form, the pingram SDK's /webhooks/events,
// validation, secret rotation, and isolation between environments and accounts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const URL_A = 'https://hooks.example.com/a';

describe.each(STORAGE_KINDS)('webhook endpoints (%s)', (kind) => {
  let t: TestContext;
  const clock = new ManualClock();
  beforeAll(async () => {
    t = await createTestContext(kind, { clock });
  });
  afterAll(() => t.close());

  const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: unknown, headers = t.auth) =>
    t.app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });

  it('creates, reads, lists, updates (keeping the secret) and deletes an endpoint', async () => {
    const created = await call('POST', '/webhooks', { webhook: URL_A, events: ['EMAIL_FAILED', 'SMS_DELIVERED'] });
    expect(created.statusCode).toBe(200);
    const body = created.json();
    expect(body).toEqual({ id: expect.any(String), webhook: URL_A, events: ['EMAIL_FAILED', 'SMS_DELIVERED'], secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{32}$/) });
    expect(Buffer.from(body.secret.slice(6), 'base64')).toHaveLength(24);

    expect((await call('GET', `/webhooks/${body.id}`)).json()).toEqual(body);
    expect((await call('GET', '/webhooks')).json()).toEqual({ webhooks: [body] });

    const updated = await call('PUT', `/webhooks/${body.id}`, { webhook: 'https://hooks.example.com/b', events: ['EMAIL_DELIVERED'] });
    expect(updated.statusCode).toBe(200);
    expect(updated.json()).toEqual({ id: body.id, webhook: 'https://hooks.example.com/b', events: ['EMAIL_DELIVERED'], secret: body.secret });

    const deleted = await call('DELETE', `/webhooks/${body.id}`);
    expect(deleted.statusCode).toBe(200);
    expect(deleted.body).toBe('');
    const gone = await call('GET', `/webhooks/${body.id}`);
    expect(gone.statusCode).toBe(404);
    expect(gone.json().error.code).toBe('NOT_FOUND');
    expect((await call('DELETE', `/webhooks/${body.id}`)).statusCode).toBe(404);
  });

  it('refuses an unknown event name by name, an empty list, and URLs that are not http(s)', async () => {
    const bad = await call('POST', '/webhooks', { webhook: URL_A, events: ['EMAIL_FAILED', 'EMAIL_BOUNCED'] });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('"EMAIL_BOUNCED"'), fix: expect.stringContaining('EMAIL_DELIVERED') });
    for (const payload of [
      { webhook: URL_A, events: [] },
      { webhook: 'ftp://hooks.example.com/', events: ['EMAIL_FAILED'] },
      { webhook: 'not a url', events: ['EMAIL_FAILED'] },
      { webhook: 'https://user:pw@hooks.example.com/', events: ['EMAIL_FAILED'] },
      { webhook: 'http://169.254.169.254/latest', events: ['EMAIL_FAILED'] },
      { webhook: URL_A },
      { events: ['EMAIL_FAILED'] },
    ]) {
      const res = await call('POST', '/webhooks', payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json()).toMatchObject({ trackingId: expect.any(String), error: { code: expect.any(String), message: expect.any(String) } });
    }
    // Every event name of the spec is accepted.
    const all = ['EMAIL_OPEN', 'EMAIL_CLICK', 'EMAIL_FAILED', 'EMAIL_DELIVERED', 'EMAIL_UNSUBSCRIBE', 'EMAIL_INBOUND', 'INAPP_WEB_FAILED', 'INAPP_WEB_UNSUBSCRIBE', 'SMS_DELIVERED', 'SMS_FAILED', 'SMS_UNSUBSCRIBE', 'SMS_SUBSCRIBE', 'SMS_INBOUND', 'VOICE_INBOUND', 'VOICE_CONNECTED', 'VOICE_ENDED', 'PUSH_FAILED', 'PUSH_UNSUBSCRIBE', 'CALL_FAILED', 'CALL_UNSUBSCRIBE', 'WEB_PUSH_FAILED', 'WEB_PUSH_UNSUBSCRIBE', 'SLACK_FAILED', 'SLACK_UNSUBSCRIBE'];
    const ok = await call('POST', '/webhooks', { webhook: URL_A, events: all });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().events).toEqual(all);
    await call('DELETE', `/webhooks/${ok.json().id}`);
  });

  it('rotates the secret; the old one is kept for 24 h to sign beside the new one', async () => {
    const { id, secret } = (await call('POST', '/webhooks', { webhook: URL_A, events: ['EMAIL_FAILED'] })).json();
    const rotated = await call('POST', `/webhooks/${id}/secret`);
    expect(rotated.statusCode).toBe(200);
    expect(rotated.json().secret).toMatch(/^whsec_/);
    expect(rotated.json().secret).not.toBe(secret);
    const row = await t.services.webhooks.repo.findEndpoint({ accountId: t.account.accountId, envId: t.account.clientId }, id);
    expect(t.deps.secrets.decrypt(row!.previous_secret_enc!)).toBe(secret);
    expect(row!.previous_secret_until).toBe(new Date(clock.now().getTime() + 24 * 3600_000).toISOString());
    // Secrets are encrypted at rest.
    expect(row!.secret_enc).not.toContain(rotated.json().secret);
    await call('DELETE', `/webhooks/${id}`);
  });

  it("serves the pingram SDK's single events webhook", async () => {
    expect((await call('GET', '/webhooks/events')).statusCode).toBe(404);
    const put = await call('PUT', '/webhooks/events', { webhook: URL_A, events: ['EMAIL_OPEN'] });
    expect(put.statusCode).toBe(200);
    const first = put.json();
    expect(first).toEqual({ webhookId: expect.any(String), webhook: URL_A, events: ['EMAIL_OPEN'], secret: expect.stringMatching(/^whsec_/) });
    const again = (await call('PUT', '/webhooks/events', { webhook: 'https://hooks.example.com/c', events: ['EMAIL_CLICK'] })).json();
    expect(again).toEqual({ webhookId: first.webhookId, webhook: 'https://hooks.example.com/c', events: ['EMAIL_CLICK'], secret: first.secret });
    expect((await call('GET', '/webhooks/events')).json()).toEqual(again);
    // It is one of the environment's endpoints.
    expect((await call('GET', '/webhooks')).json().webhooks.map((w: { id: string }) => w.id)).toContain(first.webhookId);
    const del = await call('DELETE', '/webhooks/events');
    expect(del.statusCode).toBe(200);
    expect((await call('GET', '/webhooks/events')).statusCode).toBe(404);
  });

  it('keeps endpoints inside their environment: other environments and accounts never see them', async () => {
    const { id } = (await call('POST', '/webhooks', { webhook: URL_A, events: ['EMAIL_FAILED'] })).json();
    const other = await t.newAccount();
    const otherAuth = { authorization: `Bearer ${other.apiKey}` };
    expect((await call('GET', '/webhooks', undefined, otherAuth)).json()).toEqual({ webhooks: [] });
    for (const [method, url, payload] of [
      ['GET', `/webhooks/${id}`],
      ['PUT', `/webhooks/${id}`, { webhook: URL_A, events: ['EMAIL_FAILED'] }],
      ['DELETE', `/webhooks/${id}`],
      ['POST', `/webhooks/${id}/secret`],
      ['GET', `/webhooks/${id}/attempts`],
      ['POST', `/webhooks/${id}/recover`, { since: '2026-01-01T00:00:00Z' }],
    ] as const) {
      expect((await call(method, url, payload, otherAuth)).statusCode, `${method} ${url}`).toBe(404);
    }
    // A second environment of the same account.
    const env = (await call('POST', '/environments', { title: 'Production' })).json();
    const inEnv = (await call('GET', `/webhooks?envId=${env.clientId}`)).json();
    expect(inEnv).toEqual({ webhooks: [] });
    expect((await call('GET', `/webhooks/${id}?envId=${env.clientId}`)).statusCode).toBe(404);
    // Still there for its owner.
    expect((await call('GET', `/webhooks/${id}`)).statusCode).toBe(200);
    await call('DELETE', `/webhooks/${id}`);
  });
});
