import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { countAcceptedSends } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/**
 * Nothing a send says is dropped unread: unknown fields and channel keys are a 400 that names
 * them (x-... top-level fields excepted), every field of the SDK's SenderPostBody does what the
 * SDK documents, and a send whose content can reach no channel says so (202 with messages).
 */
describe.each(STORAGE_KINDS)('send: nothing silently ignored (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  const send = (payload: unknown) => t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object });
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] ? log(trackingId) : undefined), 15_000, field);
  const mail = { subject: 'Hi {{ name }}', html: '<p>{{ name }}</p>' };

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
  });

  it('answers 200 with no messages for a plain send, 202 when messages warn', async () => {
    const plain = await send({ type: 'strict_ok', to: { id: 'u1', email: 'u1@example.com' }, email: mail });
    expect(plain.statusCode).toBe(200);
    expect(plain.json().messages).toEqual([]);
    const warned = await send({ type: 'strict_ok', to: { id: 'u1' }, templateId: 'missing', inapp: { title: 'x' } });
    expect(warned.statusCode).toBe(202);
    expect(warned.json().messages).toEqual([expect.stringContaining('templateId "missing"')]);
  });

  it('refuses an unknown top-level field, channel key or nested field with a 400 naming it, and accepts nothing', async () => {
    const before = await countAcceptedSends(t.deps);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ emial: mail }, /emial/],
      [{ email: mail, dedupe: true }, /dedupe/],
      [{ email: { ...mail, text: 'plain' } }, /text/],
      [{ sms: { text: 'hi' } }, /text/],
      [{ inapp: { title: 't', link: 'https://example.com' } }, /link/],
      [{ email: mail, options: { email: { replyTo: 'a@example.com' } } }, /replyTo/],
      [{ email: mail, options: { webpush: {} } }, /webpush/],
      [{ email: mail, to: { id: 'u1', mail: 'typo@example.com' } }, /mail/],
    ];
    for (const [extra, name] of cases) {
      const res = await send({ type: 'strict_bad', to: { id: 'u1' }, ...extra });
      const body = expectErrorBody(res, 400, 'VALIDATION_FAILED', name);
      expect(body.error.message).toMatch(/additional propert/i);
    }
    expect(await countAcceptedSends(t.deps)).toBe(before);
  });

  it('accepts top-level x-... fields (kept with the request, not interpreted)', async () => {
    const res = await send({ type: 'strict_ext', to: { id: 'u1', email: 'u1@example.com' }, email: mail, 'x-campaign': { id: 7 } });
    expect(res.statusCode).toBe(200);
    await settled(res.json().trackingId, 'email_sent_at');
    // Only at the top: a nested x- field is as unknown as any other.
    expectErrorBody(await send({ type: 'strict_ext', to: { id: 'u1' }, email: { ...mail, 'x-campaign': 1 } }), 400, 'VALIDATION_FAILED', /x-campaign/);
  });

  it('reads replace as parameters (deprecated alias, like mergeTags) and refuses two names of one field', async () => {
    const res = await send({ type: 'strict_replace', to: { id: 'r1', email: 'r1@example.com' }, replace: { name: 'Replaced' }, email: mail });
    expect(res.statusCode).toBe(200);
    await settled(res.json().trackingId, 'email_sent_at');
    expect(smtp.messages.find((m) => m.envelope.to[0] === 'r1@example.com')?.parsed.subject).toBe('Hi Replaced');

    expectErrorBody(await send({ type: 'x', to: { id: 'r1' }, parameters: { a: 1 }, replace: { a: '2' }, email: mail }), 400, 'VALIDATION_FAILED', /parameters and replace/);
    expectErrorBody(await send({ type: 'x', notificationId: 'y', to: { id: 'r1' }, email: mail }), 400, 'VALIDATION_FAILED', /type and notificationId/);
    expectErrorBody(await send({ type: 'x', to: { id: 'r1' }, user: { id: 'r2' }, email: mail }), 400, 'VALIDATION_FAILED', /to and user/);
  });

  it('evaluates options.email.condition over the parameters and the user: false skips the email channel', async () => {
    const options = { email: { condition: 'plan == "pro" and user.email contains "@example.com"' } };
    const yes = await send({ type: 'strict_cond', to: { id: 'c1', email: 'c1@example.com' }, parameters: { plan: 'pro', name: 'A' }, email: mail, options });
    const no = await send({ type: 'strict_cond', to: { id: 'c2', email: 'c2@example.com' }, parameters: { plan: 'free', name: 'B' }, email: mail, inapp: { title: 'x' }, options });
    expect(await settled(yes.json().trackingId, 'email_sent_at')).toMatchObject({ email_routing: 'SEND' });
    const skipped = await settled(no.json().trackingId, 'inapp_sent_at');
    expect(skipped).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'CONDITION_NOT_MET' });
    expect(skipped.email_sent_at).toBeUndefined();
    // A condition that cannot run (an unknown filter) fails the email channel with the render error, not the send.
    const broken = await send({ type: 'strict_cond', to: { id: 'c3', email: 'c3@example.com' }, email: mail, options: { email: { condition: 'plan | no_such_filter' } } });
    expect(await settled(broken.json().trackingId, 'email_failed_at')).toMatchObject({ email_failed_code: 'TEMPLATE_RENDER_FAILED' });
  });

  it('says so when the content reaches no channel: no content and no template, or content outside forceChannels', async () => {
    const none = await send({ type: 'strict_empty', to: { id: 'n1', email: 'n1@example.com' } });
    expect(none.statusCode).toBe(202);
    expect(none.json().messages).toEqual([expect.stringMatching(/reaches no channel.*no template of "strict_empty"/)]);

    const outside = await send({ type: 'strict_forced', to: { id: 'n1', number: '+14155550100' }, forceChannels: ['SMS'], email: mail });
    expect(outside.statusCode).toBe(202);
    expect(outside.json().messages).toEqual([
      'email content is not used: EMAIL is not in forceChannels.',
      expect.stringMatching(/reaches no channel: no inline content on forceChannels \(SMS\)/),
    ]);

    // A template on a forced channel is content: no warning.
    const created = await t.app.inject({ method: 'POST', url: '/notifications/strict_tpl/EMAIL/templates', headers: t.auth, payload: { templateId: 'main', subject: 'S', html: '<p>h</p>' } });
    expect(created.statusCode).toBe(200);
    const templated = await send({ type: 'strict_tpl', to: { id: 'n2', email: 'n2@example.com' }, forceChannels: ['EMAIL'] });
    expect(templated.statusCode).toBe(200);
    expect(templated.json().messages).toEqual([]);
  });

  it('every field of the SDK SenderPostBody passes through the SDK', async () => {
    const client = new Pingram({ apiKey: t.account.apiKey, baseUrl: await t.app.listen({ port: 0, host: '127.0.0.1' }) });
    // sms.from must be a number of the account (on the development carrier, any US number can be ordered).
    await client.numbers.orderNumber({ phoneNumber: '+14155550102' });
    const sent = await client.send({
      type: 'strict_sdk',
      to: { id: 's1', email: 's1@example.com', number: '+14155550101', timezone: 'UTC' },
      forceChannels: ['EMAIL' as never, 'INAPP_WEB' as never],
      parameters: { name: 'SDK' },
      templateId: 'none',
      subNotificationId: 'sub-1',
      schedule: '',
      options: {
        email: { replyToAddresses: ['r@example.com'], ccAddresses: [], bccAddresses: [], fromName: 'Team', condition: 'name == "SDK"' },
        apn: { expiry: 60, priority: 10, collapseId: 'c', threadId: 't', badge: 1, sound: 'default', contentAvailable: false },
        fcm: { android: { collapseKey: 'k', priority: 'high' as never, ttl: 60, restrictedPackageName: 'com.example' } },
        push: { customData: { a: '1' } },
      },
      email: { subject: 'Hi {{ name }}', html: '<p>x</p>', previewText: 'p', senderName: 'Team' },
      inapp: { title: 'Hi', url: 'https://example.com', image: 'https://example.com/i.png' },
      sms: { message: 'm', mediaUrls: [], from: '+14155550102', autoReply: { message: 'thanks' } },
      call: { message: 'c' },
      web_push: { title: 'w', message: 'm', icon: 'https://example.com/i.png', url: 'https://example.com' },
      mobile_push: { title: 'p', message: 'm' },
      slack: { text: 't', username: 'bot', mrkdwn: true, unfurl_links: false, unfurl_media: false, link_names: false, reply_broadcast: false, parse: 'none' as never },
    });
    expect(sent.messages).toEqual([
      'sms content is not used: SMS is not in forceChannels.',
      'call content is not used: CALL is not in forceChannels.',
      'mobile_push content is not used: PUSH is not in forceChannels.',
      'web_push content is not used: WEB_PUSH is not in forceChannels.',
      'slack content is not used: SLACK is not in forceChannels.',
      expect.stringContaining('templateId "none"'),
    ]);
    const record = await settled(sent.trackingId, 'email_sent_at');
    expect(record).toMatchObject({ email_routing: 'SEND', inapp_routing: 'SEND', sms_routing_reason: 'NOT_IN_FORCE_CHANNELS' });
    expect(smtp.messages.find((m) => m.envelope.to.includes('s1@example.com'))?.parsed.subject).toBe('Hi SDK');
  });
});
