// The SSRF matrix for webhook deliveries with the guard on: loopback, unspecified, link-local
// metadata and private addresses (literal, IPv4-mapped, or behind a DNS name) are refused before
// any connection, and redirects are never followed. A receiver listens on loopback (both
// families) so that a request the guard let through would show.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookSender } from '../../src/modules/webhooks/webhook-sender.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

describe('webhook SSRF guard', () => {
  let receiver: WebhookReceiver;
  let target: WebhookReceiver;
  beforeAll(async () => {
    receiver = await new WebhookReceiver().start('::');
    target = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await receiver.close();
    await target.close();
  });

  const lookupTo = (address: string, family = 4) => async () => [{ address, family }];

  it('refuses every internal target before connecting', async () => {
    const port = receiver.port;
    const cases: [string, WebhookSender][] = [];
    const guarded = (lookup?: (h: string) => Promise<{ address: string; family: number }[]>) => new WebhookSender({ timeoutMs: 2000, allowPrivateNetworks: false, connectionsPerEndpoint: 1, ...(lookup ? { lookup } : {}) });
    for (const url of [
      `http://127.0.0.1:${port}/hook`,
      `http://[::1]:${port}/hook`,
      `http://[::ffff:127.0.0.1]:${port}/hook`,
      `http://[::ffff:7f00:1]:${port}/hook`,
      `http://0.0.0.0:${port}/hook`,
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.1/hook',
      'http://172.16.0.1/hook',
      'http://172.31.255.254/hook',
      'http://192.168.1.1/hook',
      `http://localhost:${port}/hook`,
    ]) {
      cases.push([url, guarded()]);
    }
    // Names resolving to a private address, or to a public and a private one.
    cases.push([`http://hooks.internal.test:${port}/hook`, guarded(lookupTo('127.0.0.1'))]);
    cases.push(['http://metadata.internal.test/', guarded(lookupTo('169.254.169.254'))]);
    cases.push(['http://intranet.test/', guarded(lookupTo('10.20.30.40'))]);
    cases.push(['http://mixed.test/', guarded(async () => [{ address: '93.184.216.34', family: 4 }, { address: '192.168.0.10', family: 4 }])]);
    cases.push([`http://v6.internal.test:${port}/`, guarded(lookupTo('::1', 6))]);

    for (const [url, sender] of cases) {
      const result = await sender.post(url, { 'x-service-id': 'evt_ssrf' }, '{}');
      expect(result.statusCode, url).toBeNull();
      expect(result.error, url).toMatch(/^ADDRESS_BLOCKED: /);
      await sender.close();
    }
    expect(receiver.requests).toHaveLength(0);
  });

  it('does not follow a redirect, even to an address it could reach', async () => {
    // The endpoint itself is let through (one allowed address); its redirect is its answer.
    const sender = new WebhookSender({ timeoutMs: 2000, allowPrivateNetworks: false, allowAddresses: ['127.0.0.1'], connectionsPerEndpoint: 1 });
    for (const location of ['http://169.254.169.254/latest/meta-data/', target.url, `http://10.0.0.1/`]) {
      receiver.answer({ status: 307, headers: { location } });
      const result = await sender.post(`http://127.0.0.1:${receiver.port}/hook`, {}, '{}');
      expect(result.statusCode).toBe(307);
    }
    await sender.close();
    expect(target.requests).toHaveLength(0);
    expect(receiver.requests).toHaveLength(3);
  });

  describe('through the service', () => {
    let t: TestContext;
    beforeAll(async () => {
      t = await createTestContext('sqlite');
    });
    afterAll(() => t.close());

    it('refuses internal address literals when the endpoint is registered', async () => {
      for (const host of ['127.0.0.1', '[::1]', '[::ffff:127.0.0.1]', '0.0.0.0', '169.254.169.254', '10.1.1.1', '172.16.0.1', '192.168.0.1']) {
        const res = await t.app.inject({ method: 'POST', url: '/webhooks', headers: t.auth, payload: { webhook: `http://${host}/hook`, events: ['EMAIL_FAILED'] } });
        expect(res.statusCode, host).toBe(400);
        expect(res.json().error.message, host).toMatch(/address/);
      }
    });

    it('records a delivery to a name that resolves inside as a failed attempt, and sends nothing', async () => {
      const scope = { accountId: t.account.accountId, envId: t.account.clientId };
      const endpoint = await t.services.webhooks.create(scope, { webhook: `http://localhost:${receiver.port}/hook`, events: ['EMAIL_FAILED'] });
      const { transition } = await import('./webhook-fixtures.js');
      await transition(t, 'email', 'failed');
      expect(await t.services.webhooks.worker.runOnce()).toBe(1);
      const { attempts } = await t.services.webhooks.attempts(scope, endpoint.id, {});
      expect(attempts[0]).toMatchObject({ success: false, statusCode: null, error: expect.stringMatching(/^ADDRESS_BLOCKED: /) });
      expect(receiver.requests.filter((r) => r.body.includes('EMAIL_FAILED'))).toHaveLength(0);
    });
  });
});
