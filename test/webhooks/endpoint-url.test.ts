// An endpoint's URL: spaces and control characters inside it are refused (most likely a pasting
// slip), any other URL is kept as given and read back the same, and requests go to its parsed,
// percent-encoded form.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { RoutedReceiver } from './routed-receiver.js';
import { transition } from './webhook-fixtures.js';

describe.each(STORAGE_KINDS)('webhook endpoint URLs (%s)', (kind) => {
  let t: TestContext;
  let receiver: RoutedReceiver;
  beforeAll(async () => {
    t = await createTestContext(kind, { clock: new ManualClock(), config: { allowPrivateNetworks: true } });
    receiver = await new RoutedReceiver().start();
  });
  afterAll(async () => {
    await receiver.close();
    await t.close();
  });

  const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: unknown) =>
    t.app.inject({ method, url, headers: t.auth, ...(payload !== undefined ? { payload: payload as object } : {}) });

  it('refuses spaces and control characters inside a URL, and keeps any other URL as given', async () => {
    for (const webhook of ['https://example.com/a b', 'https://example.com/a\tb', 'https://example.com/a\nb', 'https://example.com/?q=a b']) {
      const res = await call('POST', '/webhooks', { webhook, events: ['EMAIL_FAILED'] });
      expect(res.statusCode, JSON.stringify(webhook)).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('spaces'), fix: expect.stringContaining('%20') });
    }
    expect((await call('GET', '/webhooks')).json().webhooks).toEqual([]);

    const created = await call('POST', '/webhooks', { webhook: 'https://example.com/a%20b', events: ['EMAIL_FAILED'] });
    expect(created.statusCode).toBe(200);
    const { id } = created.json<{ id: string }>();
    expect((await call('GET', `/webhooks/${id}`)).json().webhook).toBe('https://example.com/a%20b');
    // What a client set is what it reads back, though requests go to the parsed form.
    const updated = await call('PUT', `/webhooks/${id}`, { webhook: 'HTTPS://Hooks.Example.COM:443/x', events: ['EMAIL_FAILED'] });
    expect(updated.json().webhook).toBe('HTTPS://Hooks.Example.COM:443/x');
    expect((await call('PUT', `/webhooks/${id}`, { webhook: 'https://example.com/x y', events: ['EMAIL_FAILED'] })).statusCode).toBe(400);
    expect((await call('GET', `/webhooks/${id}`)).json().webhook).toBe('HTTPS://Hooks.Example.COM:443/x');
    expect((await call('DELETE', `/webhooks/${id}`)).statusCode).toBe(200);

    const sdk = await call('PUT', '/webhooks/events', { webhook: 'https://example.com/hooks/é', events: ['EMAIL_OPEN'] });
    expect(sdk.statusCode).toBe(200);
    expect((await call('GET', '/webhooks/events')).json().webhook).toBe('https://example.com/hooks/é');
    expect((await call('PUT', '/webhooks/events', { webhook: 'https://example.com/a b', events: ['EMAIL_OPEN'] })).statusCode).toBe(400);
    expect((await call('DELETE', '/webhooks/events')).statusCode).toBe(200);
  });

  it('posts a URL with characters to encode to its encoded path', async () => {
    const created = await call('POST', '/webhooks', { webhook: receiver.url('/hooks/é'), events: ['EMAIL_FAILED'] });
    expect(created.statusCode).toBe(200);
    expect(created.json().webhook).toBe(receiver.url('/hooks/é'));
    await transition(t, 'email', 'failed');
    expect(await t.services.webhooks.worker.runOnce()).toBe(1);
    expect(receiver.requests.map((r) => r.path)).toEqual(['/hooks/%C3%A9']);
    const { attempts } = (await call('GET', `/webhooks/${created.json().id}/attempts`)).json();
    expect(attempts).toEqual([expect.objectContaining({ success: true, statusCode: 200 })]);
  });
});
