// Preferences in routing, on both engines with the delivery workers: a channel the user turned
// off is SKIP with USER_UNSUBSCRIBED (forceChannels included), a channel off by the type's
// default is SKIP with OFF_BY_DEFAULT (forceChannels bypasses it), a sub-notification's option
// wins over the type's; turning a channel off emits its *_UNSUBSCRIBE event, once, to a webhook
// receiver on loopback.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

type Payload = { eventType: string; channel: string; userId: string; notificationId: string; trackingId: string; details: Record<string, unknown> };

describe.each(STORAGE_KINDS)('preferences in routing and unsubscribe events (%s)', (kind) => {
  let t: TestContext;
  let receiver: WebhookReceiver;
  const req = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) =>
    t.app.inject({ method, url, headers: t.auth, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const events = () => receiver.requests.map((r) => JSON.parse(r.body) as Payload);

  const send = async (user: string, extra: Record<string, unknown> = {}) => {
    const res = await req('POST', '/send', { type: 'digest', to: { id: user, email: `${user}@example.com` }, email: { subject: 'Hi', html: '<p>Hi</p>' }, inapp: { title: 'Hi' }, ...extra });
    expect(res.statusCode, res.body).toBe(200);
    const { trackingId } = res.json<{ trackingId: string }>();
    return eventually(async () => {
      const record = (await req('GET', `/logs/${trackingId}`)).json().logs?.[0] as Record<string, unknown> | undefined;
      return record?.email_routing && record.inapp_routing ? record : undefined;
    }, 10_000, `routing of ${trackingId}`);
  };

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    t = await createTestContext(kind, { workers: true, config: { allowPrivateNetworks: true, webhookPollMs: 20 } });
    t.services.webhooks.worker.start();
    const hook = await req('POST', '/webhooks', { webhook: receiver.url, events: ['EMAIL_UNSUBSCRIBE', 'INAPP_WEB_UNSUBSCRIBE', 'SMS_UNSUBSCRIBE'] });
    expect(hook.statusCode, hook.body).toBe(200);
    const type = await req('POST', '/types', { notificationId: 'digest', title: 'Digest', channels: ['EMAIL', 'INAPP_WEB', 'SMS'], options: { INAPP_WEB: { defaultDeliveryOption: 'off' } } });
    expect(type.statusCode, type.body).toBe(200);
  });
  afterAll(async () => {
    await t.services.webhooks.worker.stop();
    await t.close();
    await receiver.close();
  });

  it('skips what the user turned off and what the type keeps off by default, each with its reason', async () => {
    const before = await send('ada');
    expect(before).toMatchObject({ email_routing: 'SEND', inapp_routing: 'SKIP', inapp_routing_reason: 'OFF_BY_DEFAULT' });

    expect((await req('POST', '/user_preferences/ada', [{ notificationId: 'digest', channel: 'EMAIL', delivery: 'off' }])).statusCode).toBe(200);
    const after = await send('ada');
    expect(after).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'USER_UNSUBSCRIBED', inapp_routing: 'SKIP', inapp_routing_reason: 'OFF_BY_DEFAULT' });

    // forceChannels bypasses the type's configuration (its default) but never the user's opt-out.
    const forced = await send('ada', { forceChannels: ['EMAIL', 'INAPP_WEB'] });
    expect(forced).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'USER_UNSUBSCRIBED', inapp_routing: 'SEND' });

    // The user's own instant overrides the type's default off.
    await req('POST', '/user_preferences/ada', [{ notificationId: 'digest', channel: 'INAPP_WEB', delivery: 'instant' }]);
    expect(await send('ada')).toMatchObject({ inapp_routing: 'SEND' });
  });

  it("follows a sub-notification's option over the type's", async () => {
    await req('POST', '/user_preferences/bob', [
      { notificationId: 'digest', channel: 'EMAIL', delivery: 'off' },
      { notificationId: 'digest', subNotificationId: 'project-7', channel: 'EMAIL', delivery: 'instant' },
    ]);
    expect(await send('bob', { subNotificationId: 'project-7' })).toMatchObject({ email_routing: 'SEND' });
    expect(await send('bob', { subNotificationId: 'project-8' })).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'USER_UNSUBSCRIBED' });
    expect(await send('bob')).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'USER_UNSUBSCRIBED' });
  });

  it("emits the channel's *_UNSUBSCRIBE event when a channel is turned off, once", async () => {
    await req('POST', '/user_preferences/cy', [{ notificationId: 'digest', channel: 'EMAIL', delivery: 'off' }]);
    // Again (no change), then instant and off for SMS: SMS_UNSUBSCRIBE is the next event.
    await req('POST', '/user_preferences/cy', [{ notificationId: 'digest', channel: 'EMAIL', delivery: 'off' }]);
    await req('POST', '/user_preferences/cy', [{ notificationId: 'digest', subNotificationId: 'weekly', channel: 'SMS', delivery: 'off' }]);
    const sms = await eventually(() => events().find((e) => e.userId === 'cy' && e.eventType === 'SMS_UNSUBSCRIBE'), 10_000, 'SMS_UNSUBSCRIBE');
    expect(sms).toMatchObject({ channel: 'SMS', notificationId: 'digest', details: { source: 'api', subNotificationId: 'weekly' } });
    const email = events().filter((e) => e.userId === 'cy' && e.eventType === 'EMAIL_UNSUBSCRIBE');
    expect(email).toHaveLength(1);
    expect(email[0]).toMatchObject({ channel: 'EMAIL', notificationId: 'digest', trackingId: '', details: { source: 'api' } });
    expect(typeof email[0].details.email_unsubscribed_at).toBe('string');

    // Back to instant and off again is a new opt-out; a reset emits nothing.
    await req('POST', '/user_preferences/cy', [{ notificationId: 'digest', channel: 'EMAIL', delivery: 'instant' }]);
    await req('POST', '/user_preferences/cy', [{ notificationId: 'digest', channel: 'EMAIL', delivery: 'off' }]);
    await req('DELETE', '/users/cy/preferences?notificationId=digest');
    await req('POST', '/user_preferences/cy', [{ notificationId: 'digest', channel: 'INAPP_WEB', delivery: 'off' }]);
    const emailEvents = () => events().filter((e) => e.userId === 'cy' && e.eventType === 'EMAIL_UNSUBSCRIBE');
    await eventually(() => emailEvents().length >= 2 && events().find((e) => e.userId === 'cy' && e.eventType === 'INAPP_WEB_UNSUBSCRIBE'), 10_000, 'INAPP_WEB_UNSUBSCRIBE');
    // Every event was written with its preference, in one transaction each: the outbox holds exactly these.
    const written = (await t.deps.db.selectFrom('webhook_events' as never).select(['type' as never, 'payload' as never]).execute()) as { type: string; payload: string }[];
    expect(written.filter((e) => e.type === 'EMAIL_UNSUBSCRIBE' && (JSON.parse(e.payload) as Payload).userId === 'cy')).toHaveLength(2);
    expect(emailEvents()).toHaveLength(2);
  });

  it('emits one event for concurrent writes of the same opt-out', async () => {
    const scope = { accountId: t.account.accountId, envId: t.account.clientId };
    const offs = Array.from({ length: 12 }, () => t.services.preferences.set(scope, 'race', [{ notificationId: 'digest', channel: 'EMAIL', delivery: 'off' }], 'api'));
    await Promise.all(offs);
    const written = (await t.deps.db.selectFrom('webhook_events' as never).select(['type' as never, 'payload' as never]).execute()) as { type: string; payload: string }[];
    expect(written.filter((e) => e.type === 'EMAIL_UNSUBSCRIBE' && (JSON.parse(e.payload) as Payload).userId === 'race')).toHaveLength(1);
  });
});
