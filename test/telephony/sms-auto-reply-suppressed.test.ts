// An SMS auto-reply never goes to a number that opted out. Clarion is configured for Twilio (a
// loopback Twilio peer that records every message it is asked to send); the test plays the
// carrier's signed inbound webhook. A reply is sent while the inbound webhook is answered, so
// once the callback's answer is in, the peer has every reply it will ever get for that text.
// The concurrent case holds a STOP's transaction open, with its suppression written but not yet
// committed, while another text from the same number comes in.
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TelephonyCallbacks } from '../../src/modules/telephony/callbacks.service.js';
import { UsersService } from '../../src/modules/users/users.service.js';
import type { CoreTables } from '../../src/storage/schema.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type TwilioPeer, startTwilioPeer, postTwilioCallback, twilioPeerConfig } from '../helpers/twilio-peer.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const FROM = '+14155550100';

/** A users service whose SMS suppression, once written inside the caller's transaction, waits for `release` before the transaction goes on. */
class HeldSuppressions extends UsersService {
  reached!: Promise<Kysely<CoreTables>>;
  private signal!: (trx: Kysely<CoreTables>) => void;
  private gate!: Promise<void>;
  release!: () => void;

  arm(): void {
    this.reached = new Promise((resolve) => (this.signal = resolve));
    this.gate = new Promise((resolve) => (this.release = resolve));
  }

  override async setSuppression(...args: Parameters<UsersService['setSuppression']>): ReturnType<UsersService['setSuppression']> {
    const user = await super.setSuppression(...args);
    const trx = args[5];
    if (trx) {
      this.signal(trx);
      await this.gate;
    }
    return user;
  }
}

describe.each(STORAGE_KINDS)('SMS auto-reply after STOP (%s)', (kind) => {
  let t: TestContext;
  let peer: TwilioPeer;
  let receiver: WebhookReceiver;
  let base: string;
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0] as Record<string, unknown>;
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] !== undefined ? log(trackingId) : undefined), 15_000, field);
  const sendWithAutoReply = async (user: { id: string; number: string }) => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'survey', to: user, sms: { message: 'hello', autoReply: { message: 'AUTO' } } } });
    expect(res.statusCode, res.body).toBe(200);
    const { trackingId } = res.json<{ trackingId: string }>();
    await settled(trackingId, 'sms_sent_at');
    return trackingId;
  };
  let sid = 0;
  const params = (from: string, body: string) => ({ MessageSid: `SMin${++sid}`, SmsSid: `SMin${sid}`, AccountSid: peer.accountSid, From: from, To: FROM, Body: body });
  /** The carrier's signed inbound webhook over real HTTP; answered once Clarion is done with the text. */
  const inbound = async (from: string, body: string) => {
    const form = params(from, body);
    const res = await postTwilioCallback(`${base}/telephony/twilio/inbound`, form, peer.authToken);
    expect([res.status, await res.text()]).toEqual([200, expect.stringContaining('<Response/>')]);
  };
  /** Bodies of the messages the peer was asked to send to `to`. */
  const sentTo = (to: string) => peer.requests.filter((r) => r.resource === 'Messages' && r.method === 'POST' && r.params.To === to).map((r) => r.params.Body);
  const stored = (type: string, trackingId: string) =>
    t.deps.db
      .withTables<{ webhook_events: { type: string; tracking_id: string | null } }>()
      .selectFrom('webhook_events')
      .select('type')
      .where('type', '=', type)
      .where('tracking_id', '=', trackingId)
      .execute();
  const routing = async (userId: string) => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'promo', to: { id: userId }, sms: { message: 'promo' } } });
    const record = await settled(res.json<{ trackingId: string }>().trackingId, 'sms_routing');
    return [record.sms_routing, record.sms_routing_reason].filter((v) => typeof v === 'string').join(' ');
  };

  beforeAll(async () => {
    peer = await startTwilioPeer();
    receiver = await new WebhookReceiver().start();
    t = await createTestContext(kind, {
      workers: true,
      config: { ...twilioPeerConfig(peer, FROM), allowPrivateNetworks: true },
    });
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
    t.deps.config.publicUrl = base;
    // Subscribed, so the events are stored with the text (the worker that would deliver them is not started).
    const endpoint = await t.app.inject({ method: 'POST', url: '/webhooks', headers: t.auth, payload: { webhook: receiver.url, events: ['SMS_INBOUND', 'SMS_UNSUBSCRIBE'] } });
    expect(endpoint.statusCode, endpoint.body).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await peer?.close();
    await receiver?.close();
  });

  it('a text after STOP is recorded with its event but gets no auto-reply; after START it gets one', async () => {
    const user = { id: 'stopper', number: '+14155550161' };
    const trackingId = await sendWithAutoReply(user);
    await inbound(user.number, 'STOP');
    expect(await routing(user.id)).toBe('SKIP USER_SUPPRESSED');

    await inbound(user.number, 'hey there');
    expect(await log(trackingId)).toMatchObject({ sms_inbound_text: 'hey there', sms_inbound_from: user.number });
    expect(await log(trackingId)).not.toHaveProperty('sms_replied_at');
    expect(await stored('SMS_INBOUND', trackingId)).toHaveLength(2);
    expect(await stored('SMS_UNSUBSCRIBE', trackingId)).toHaveLength(1);
    expect(sentTo(user.number)).toEqual(['hello']);

    // Not claimed while suppressed: once the user opts back in, the next text gets the one reply.
    await inbound(user.number, 'START');
    await inbound(user.number, 'hey again');
    expect(sentTo(user.number)).toEqual(['hello', 'AUTO']);
    expect(await log(trackingId)).toMatchObject({ sms_replied_text: 'AUTO', sms_replied_to: user.number });
  });

  it('a text arriving while a STOP from the same number is being recorded gets no auto-reply', async () => {
    const user = { id: 'racer', number: '+14155550162' };
    const trackingId = await sendWithAutoReply(user);
    const held = new HeldSuppressions(t.deps);
    held.arm();
    const stopping = new TelephonyCallbacks(t.deps, held, t.services.webhooks.outbox);
    const stop = stopping.inbound(params(user.number, 'STOP'));
    const stopTrx = await held.reached;
    // The STOP's suppression is written, not committed; now the other text comes in.
    const text = t.services.telephonyCallbacks.inbound(params(user.number, 'hey there'));
    if (kind === 'postgres') {
      // Wait until the text's transaction is waiting on a lock the STOP holds.
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(stopTrx);
      const stopPid = rows[0].pid;
      await eventually(async () => {
        const blocked = await sql<{ n: string }>`select count(*) as n from pg_stat_activity where ${stopPid}::int = any(pg_blocking_pids(pid))`.execute(t.deps.db);
        return Number(blocked.rows[0].n) > 0;
      }, 15_000, 'the text to wait for the STOP');
    }
    // SQLite runs one transaction at a time: the text's statements queue behind the STOP's.
    held.release();
    await Promise.all([stop, text]);

    expect(sentTo(user.number)).toEqual(['hello']);
    expect(await log(trackingId)).toMatchObject({ sms_inbound_text: 'hey there' });
    expect(await log(trackingId)).not.toHaveProperty('sms_replied_at');
    expect(await stored('SMS_INBOUND', trackingId)).toHaveLength(2);
    expect(await routing(user.id)).toBe('SKIP USER_SUPPRESSED');
  });

  it('a text to a number that is not suppressed still gets its one auto-reply', async () => {
    const user = { id: 'replier', number: '+14155550163' };
    const trackingId = await sendWithAutoReply(user);
    await inbound(user.number, 'hey there');
    await inbound(user.number, 'hey again');
    expect(sentTo(user.number)).toEqual(['hello', 'AUTO']);
    expect(await log(trackingId)).toMatchObject({ sms_inbound_text: 'hey again', sms_replied_text: 'AUTO' });
  });
});
