// Digests on both engines with the delivery workers and a clock the test moves: a channel set to
// a digest collects the user's messages (delivery status digested, the log naming the digest),
// and the periodic job's run sends one message per period at the chosen time in the user's
// zone (across New York's DST change), rendered by the type's digest template or the built-in
// one; an empty period sends nothing; items survive a restart; a claim that dies before its
// commit leaves the digest to the next run, which sends it once; a retract takes an item back.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Deps, buildDeps } from '../../src/deps.js';
import { DigestsRepository } from '../../src/modules/digests/digests.repository.js';
import { DigestsService } from '../../src/modules/digests/digests.service.js';
import { SendIntake } from '../../src/modules/sending/intake.js';
import { buildServices } from '../../src/services.js';
import { ManualClock, type TestContext, createTestContext, testConfig } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

type Log = Record<string, unknown>;

describe.each(STORAGE_KINDS)('digests (%s)', (kind) => {
  let t: TestContext;
  const clock = new ManualClock(new Date('2026-03-07T15:00:00Z'));
  const req = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
    t.app.inject({ method, url, headers: t.auth, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const log = async (trackingId: string): Promise<Log | undefined> => (await req('GET', `/logs/${trackingId}`)).json().logs?.[0] as Log | undefined;
  const scope = () => ({ accountId: t.account.accountId, envId: t.account.clientId });
  const digestsOf = (userId: string) => new DigestsRepository(t.deps.db).ofUser(t.account.accountId, t.account.clientId, userId);
  const mailsTo = async (address: string) => {
    const list = await t.services.repositories.mailCatcher.list(scope(), { to: address, limit: 50 });
    return Promise.all(list.map(async (m) => (await t.services.repositories.mailCatcher.find(scope(), m.id))!));
  };

  /** Sends one item of `type` to `user` and waits until routing decided its email (digested or sent). */
  const send = async (user: { id: string; timezone?: string }, n: number, extra: Record<string, unknown> = {}, type = 'news') => {
    const res = await req('POST', '/send', {
      type,
      to: { ...user, email: `${user.id}@example.com` },
      parameters: { n },
      email: { subject: `Order {{ n }} shipped`, html: '<p>Order {{ n }}</p>' },
      ...extra,
    });
    expect(res.statusCode, res.body).toBe(200);
    const { trackingId } = res.json<{ trackingId: string }>();
    await eventually(async () => (await log(trackingId))?.email_routing, 20_000, `routing of ${trackingId}`);
    return trackingId;
  };
  const prefer = async (userId: string, delivery: string, type = 'news') => {
    const res = await req('POST', `/user_preferences/${userId}`, [{ notificationId: type, channel: 'EMAIL', delivery }]);
    expect(res.statusCode, res.body).toBe(200);
  };

  beforeAll(async () => {
    t = await createTestContext(kind, { clock, workers: true });
    const created = await req('POST', '/types', {
      notificationId: 'news',
      title: 'News',
      channels: ['EMAIL', 'INAPP_WEB'],
      options: {
        EMAIL: {
          defaultDeliveryOption: 'instant',
          hourly: { enabled: true },
          daily: { enabled: true, hour: '09:00' },
          weekly: { enabled: true, hour: '18:00', day: 'Friday' },
          monthly: { enabled: true, hour: '08:00', date: 'last' },
        },
      },
    });
    expect(created.statusCode, created.body).toBe(200);
  });
  afterAll(() => t.close());

  it("lets users pick the type's digests through the in-app client's route, the older server SDK's and API keys", async () => {
    const basic = (text: string) => `Basic ${Buffer.from(text).toString('base64')}`;
    const { clientId, clientSecret } = t.account;
    // The in-app client posts JSON as text/plain with Basic clientId:userId.
    const inapp = await t.app.inject({
      method: 'POST',
      url: `/${clientId}/users/pick-a/preferences`,
      headers: { authorization: basic(`${clientId}:pick-a`), 'content-type': 'text/plain' },
      payload: JSON.stringify([{ notificationId: 'news', channel: 'EMAIL', delivery: 'weekly' }]),
    });
    expect(inapp.statusCode, inapp.body).toBe(200);
    const sdk = await t.app.inject({
      method: 'POST',
      url: `/${clientId}/user_preferences/pick-b`,
      headers: { authorization: basic(`${clientId}:${clientSecret}`) },
      payload: [{ notificationId: 'news', channel: 'EMAIL', delivery: 'monthly' }],
    });
    expect(sdk.statusCode, sdk.body).toBe(200);
    await prefer('pick-c', 'hourly');
    for (const [user, delivery] of [['pick-a', 'weekly'], ['pick-b', 'monthly'], ['pick-c', 'hourly']]) {
      expect((await req('GET', `/users/${user}/preferences`)).json().preferences).toEqual([{ notificationId: 'news', channel: 'EMAIL', delivery }]);
    }
    // In-app has no digests; a digest the type does not offer is refused, naming what may be picked.
    const inappDigest = await req('POST', '/user_preferences/pick-c', [{ notificationId: 'news', channel: 'INAPP_WEB', delivery: 'daily' }]);
    expect(inappDigest.statusCode).toBe(400);
    expect(inappDigest.json().error.message).toContain('in-app has no digests');
    await req('POST', '/types', { notificationId: 'plain', title: 'Plain', channels: ['EMAIL'], options: { EMAIL: { defaultDeliveryOption: 'instant', daily: { enabled: false } } } });
    const notOffered = await req('POST', '/user_preferences/pick-c', [{ notificationId: 'plain', channel: 'EMAIL', delivery: 'daily' }]);
    expect(notOffered.statusCode).toBe(400);
    expect(notOffered.json().error).toMatchObject({ code: 'VALIDATION_FAILED', fix: 'Pick one of: off, instant.' });
  });

  it('collects a daily digest and sends it once at 09:00 New York time, after the DST change', async () => {
    clock.set(new Date('2026-03-07T15:00:00Z')); // Saturday 10:00 EST
    await prefer('ny', 'daily');
    const ny = { id: 'ny', timezone: 'America/New_York' };
    const items = [await send(ny, 1, { inapp: { title: 'instant still' } }), await send(ny, 2)];

    const first = (await log(items[0]))!;
    // 09:00 on Sunday 8 March is EDT (UTC-4): 13:00Z, not 14:00Z.
    expect(first).toMatchObject({ email_routing: 'SEND', email_digest: 'daily', email_digest_due_at: '2026-03-08T13:00:00.000Z', email_digested_at: '2026-03-07T15:00:00.000Z' });
    expect(first.email_sent_at).toBeUndefined();
    // Only the digested channel waits: in-app went out at once.
    await eventually(async () => (await log(items[0]))?.inapp_delivered_at, 20_000, 'in-app delivered');
    const [digest] = await digestsOf('ny');
    expect(digest).toMatchObject({ state: 'open', item_count: 2, option: 'daily', timezone: 'America/New_York', due_at: '2026-03-08T13:00:00.000Z' });
    expect((await log(items[1]))!.email_digest_id).toBe(digest.id);
    expect(await mailsTo('ny@example.com')).toEqual([]);

    clock.set(new Date('2026-03-08T12:59:59Z'));
    expect(await t.services.digests.sendDue()).toBe(0);
    clock.set(new Date('2026-03-08T13:00:00Z'));
    expect(await t.services.digests.sendDue()).toBe(1);
    expect(await t.services.digests.sendDue()).toBe(0);

    const [mail] = await eventually(async () => {
      const mails = await mailsTo('ny@example.com');
      return mails.length > 0 ? mails : undefined;
    }, 20_000, 'the digest email');
    expect(mail.subject).toBe('2 new notifications');
    expect(mail.html).toContain('<li>Order 1 shipped</li><li>Order 2 shipped</li>');
    const [sent] = await digestsOf('ny');
    expect(sent).toMatchObject({ id: digest.id, state: 'sent', sent_at: '2026-03-08T13:00:00.000Z' });
    expect(mail.tracking_id).toBe(sent.tracking_id);
    // The log: each item names the digest's message; that message's email was sent.
    for (const id of items) expect(await log(id)).toMatchObject({ email_digest_id: digest.id, email_digest_tracking_id: sent.tracking_id });
    await eventually(async () => (await log(sent.tracking_id!))?.email_sent_at, 20_000, 'digest message sent');
    expect(await log(sent.tracking_id!)).toMatchObject({ type: 'news', user_id: 'ny', email_routing: 'SEND', inapp_routing: 'SKIP', inapp_routing_reason: 'NOT_IN_FORCE_CHANNELS' });

    // An empty period sends nothing: a day later there is no new digest and no new mail.
    clock.set(new Date('2026-03-09T13:00:00Z'));
    expect(await t.services.digests.sendDue()).toBe(0);
    expect(await digestsOf('ny')).toHaveLength(1);
    expect(await mailsTo('ny@example.com')).toHaveLength(1);

    // The next item opens the next period's digest: 09:00 EDT on the 10th.
    const next = await send(ny, 3);
    expect(await log(next)).toMatchObject({ email_digest_due_at: '2026-03-10T13:00:00.000Z' });
    expect((await digestsOf('ny'))[0]).toMatchObject({ state: 'open', item_count: 1 });
  });

  it("computes each option's due time in the user's zone and renders the type's digest template for its mode", async () => {
    clock.set(new Date('2026-03-06T09:00:00Z')); // a Friday
    // The weekly digest template of EMAIL: the template that is the default for mode "weekly".
    const instant = await req('POST', '/notifications/news/EMAIL/templates', { templateId: 'one', subject: 'One: {{ n }}', html: '<p>{{ n }}</p>' });
    expect(instant.statusCode, instant.body).toBe(200);
    const weekly = await req('POST', '/notifications/news/EMAIL/templates', {
      templateId: 'week',
      subject: 'Your week: {{ count }} updates',
      html: '<ol>{% for item in items %}<li>#{{ item.parameters.n }} {{ item.content.subject }} at {{ item.date }}</li>{% endfor %}</ol><p>{{ digest.option }}</p>',
    });
    expect(weekly.statusCode, weekly.body).toBe(200);
    const selected = await req('PATCH', '/notifications/news/EMAIL/templates/default-selection', { templateId: 'week', modes: ['weekly'] });
    expect(selected.statusCode, selected.body).toBe(200);

    const users = [
      { id: 'opt-hourly', timezone: 'Asia/Kolkata', option: 'hourly', due: '2026-03-06T09:30:00.000Z' },
      { id: 'opt-weekly', timezone: 'Europe/Berlin', option: 'weekly', due: '2026-03-06T17:00:00.000Z' },
      { id: 'opt-monthly', timezone: 'Australia/Sydney', option: 'monthly', due: '2026-03-30T21:00:00.000Z' },
      // No zone: UTC. 09:00 UTC is now: the next one is tomorrow's.
      { id: 'opt-daily', timezone: undefined, option: 'daily', due: '2026-03-07T09:00:00.000Z' },
    ];
    for (const u of users) {
      await prefer(u.id, u.option);
      const to = u.timezone ? { id: u.id, timezone: u.timezone } : { id: u.id };
      const ids = [await send(to, 10), await send(to, 11)];
      for (const id of ids) expect(await log(id), u.id).toMatchObject({ email_digest: u.option, email_digest_due_at: u.due });
    }
    // Each is sent once it is due, not before.
    clock.set(new Date('2026-03-06T17:00:00Z'));
    expect(await t.services.digests.sendDue()).toBe(2);
    expect((await digestsOf('opt-monthly'))[0].state).toBe('open');
    clock.set(new Date('2026-03-31T00:00:00Z'));
    // The monthly and the daily one (and the first test's next New York digest, due on the 10th).
    expect(await t.services.digests.sendDue()).toBe(3);
    for (const u of users) expect((await digestsOf(u.id))[0].state, u.id).toBe('sent');

    for (const u of users) {
      const mails = await eventually(async () => {
        const found = await mailsTo(`${u.id}@example.com`);
        return found.length > 0 ? found : undefined;
      }, 20_000, `digest of ${u.id}`);
      expect(mails, u.id).toHaveLength(1);
      if (u.option === 'weekly') {
        expect(mails[0].subject).toBe('Your week: 2 updates');
        expect(mails[0].html).toContain('<li>#10 Order 10 shipped at ');
        expect(mails[0].html).toContain('<li>#11 Order 11 shipped at ');
        expect(mails[0].html).toContain('<p>weekly</p>');
      } else {
        // No template is the default for this mode: the built-in one (not the instant template).
        expect(mails[0].subject, u.id).toBe('2 new notifications');
      }
    }
  });

  it("follows a digest default of the type unless forceChannels bypasses it; the user's own digest holds under forceChannels", async () => {
    clock.set(new Date('2026-03-07T15:00:00Z'));
    const type = await req('POST', '/types', { notificationId: 'weekly-news', title: 'Weekly', channels: ['EMAIL'], options: { EMAIL: { defaultDeliveryOption: 'hourly' } } });
    expect(type.statusCode, type.body).toBe(200);
    const user = { id: 'defaults' };
    expect(await log(await send(user, 1, {}, 'weekly-news'))).toMatchObject({ email_digest: 'hourly', email_digest_due_at: '2026-03-07T16:00:00.000Z' });
    const forced = await send(user, 2, { forceChannels: ['EMAIL'] }, 'weekly-news');
    expect((await log(forced))!.email_digest).toBeUndefined();
    await eventually(async () => (await log(forced))?.email_sent_at, 20_000, 'forced send sent now');

    await prefer('defaults', 'hourly', 'weekly-news');
    expect(await log(await send(user, 3, { forceChannels: ['EMAIL'] }, 'weekly-news'))).toMatchObject({ email_digest: 'hourly' });
    // A user who turns the digest back to instant gets the next one at once.
    await prefer('defaults', 'instant', 'weekly-news');
    const instant = await send(user, 4, {}, 'weekly-news');
    expect((await log(instant))!.email_digest).toBeUndefined();
  });

  it('keeps collected items across a restart: services built anew over the same database send them', async () => {
    clock.set(new Date('2026-03-07T15:00:00Z'));
    await prefer('restart', 'hourly');
    const items = [await send({ id: 'restart' }, 1), await send({ id: 'restart' }, 2)];
    // A new process: its own storage connection, deps and services; nothing kept in memory.
    const storage = t.storage.reopen();
    const deps: Deps = buildDeps(testConfig(), { storage, logger: pino({ level: 'silent' }), secrets: t.deps.secrets, clock, queue: t.storage.bossSchema ? { bossSchema: t.storage.bossSchema } : {} });
    try {
      clock.set(new Date('2026-03-07T16:00:00Z'));
      // (Other tests' digests due by then go too.)
      expect(await buildServices(deps).digests.sendDue()).toBeGreaterThanOrEqual(1);
    } finally {
      await storage.close();
    }
    const [digest] = await digestsOf('restart');
    expect(digest.state).toBe('sent');
    for (const id of items) expect(await log(id)).toMatchObject({ email_digest_tracking_id: digest.tracking_id });
    await eventually(async () => (await mailsTo('restart@example.com')).length === 1, 20_000, 'digest delivered by the first process');
  });

  it('sends a digest once: a claim that dies before its commit leaves it whole, concurrent runs send it once', async () => {
    // Earlier tests' digests due by 16:00 go first, so the counts below are this test's.
    clock.set(new Date('2026-03-07T16:00:00Z'));
    await t.services.digests.sendDue();
    clock.set(new Date('2026-03-07T15:00:00Z'));
    await prefer('crash', 'hourly');
    const items = [await send({ id: 'crash' }, 1), await send({ id: 'crash' }, 2), await send({ id: 'crash' }, 3)];
    clock.set(new Date('2026-03-07T16:00:00Z'));
    // The intake writes the digest's message, then the worker "dies" before the commit.
    const real = new SendIntake(t.deps, t.deps.queue);
    const dying = new DigestsService(t.deps, {
      acceptWithin: async (trx, units) => {
        await real.acceptWithin(trx, units);
        throw new Error('worker died mid-claim');
      },
    });
    expect(await dying.sendDue()).toBe(0);
    const [open] = await digestsOf('crash');
    expect(open).toMatchObject({ state: 'open', tracking_id: null, item_count: 3 });
    for (const id of items) expect((await log(id))!.email_digest_tracking_id).toBeUndefined();

    const counts = await Promise.all([t.services.digests.sendDue(), t.services.digests.sendDue(), new DigestsService(t.deps, real).sendDue()]);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(1);
    const [sent] = await digestsOf('crash');
    expect(sent.state).toBe('sent');
    const mails = await eventually(async () => {
      const found = await mailsTo('crash@example.com');
      return found.length > 0 ? found : undefined;
    }, 20_000, 'the digest email');
    expect(mails).toHaveLength(1);
    expect(mails[0].subject).toBe('3 new notifications');
    expect(await t.deps.db.selectFrom('messages' as never).select('tracking_id' as never).where('user_id' as never, '=', 'crash' as never).execute()).toHaveLength(4);
  });

  it("fails the items when the recipient is deleted before the digest is due, and sends nothing", async () => {
    clock.set(new Date('2026-03-07T15:00:00Z'));
    await prefer('gone', 'hourly');
    const item = await send({ id: 'gone' }, 1);
    expect((await req('DELETE', '/users/gone')).statusCode).toBe(200);
    clock.set(new Date('2026-03-07T16:00:00Z'));
    expect(await t.services.digests.sendDue()).toBe(0);
    expect((await digestsOf('gone'))[0]).toMatchObject({ state: 'failed', failed_code: 'USER_DELETED', tracking_id: null });
    expect(await log(item)).toMatchObject({ email_failed_code: 'USER_DELETED', email_digest: 'hourly' });
  });

  it('a retract takes back an item of a digest not sent yet: it drops out, the rest is sent', async () => {
    clock.set(new Date('2026-03-07T15:00:00Z'));
    await prefer('rt', 'hourly');
    const kept = await send({ id: 'rt' }, 1);
    const taken = await send({ id: 'rt' }, 2, { subNotificationId: 'thread-9' });
    const basic = `Basic ${Buffer.from(`${t.account.clientId}:${t.account.clientSecret}`).toString('base64')}`;
    const res = await t.app.inject({ method: 'POST', url: `/${t.account.clientId}/sender/retract`, headers: { authorization: basic }, payload: { notificationId: 'news', userId: 'rt', secondaryId: 'thread-9' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ trackingIds: [taken], deliveries: 1 });
    expect(await log(taken)).toMatchObject({ email_digest: 'hourly', email_retracted_at: '2026-03-07T15:00:00.000Z' });

    clock.set(new Date('2026-03-07T16:00:00Z'));
    expect(await t.services.digests.sendDue()).toBe(1);
    const [mail] = await eventually(async () => {
      const mails = await mailsTo('rt@example.com');
      return mails.length > 0 ? mails : undefined;
    }, 20_000, 'the digest email');
    expect(mail.html).toContain('Order 1 shipped');
    expect(mail.html).not.toContain('Order 2 shipped');
    const [sent] = await digestsOf('rt');
    expect(await log(kept)).toMatchObject({ email_digest_tracking_id: sent.tracking_id });
    expect((await log(taken))!.email_digest_tracking_id).toBeUndefined();
  });
});
