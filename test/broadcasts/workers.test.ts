// Broadcasts with the workers running, on both engines: POST .../test sends the rendered broadcast
// through POST /send's path to a real SMTP server on loopback (not counted in the broadcast), and
// the broadcasts' jobs run by the queue: the freeze and delivery after a send, and the start of a scheduled
// broadcast by the sweep each worker schedules every minute (injected clock).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callAs, createDraft, seedUsers, userRow } from '../helpers/broadcasts.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('broadcasts with workers (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  const clock = new ManualClock(new Date('2026-05-04T07:00:00.000Z'));
  const call = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown) => callAs(t, method, url, payload);
  const broadcast = async (id: string) => (await call('GET', `/broadcasts/${id}`)).json<{ status: string }>();

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    t = await createTestContext(kind, { clock, workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
    await seedUsers(t, [
      userRow(t, 'reader-1', { email: 'reader-1@example.com', properties: '{"plan":"pro","first":"Ada"}' }),
      userRow(t, 'reader-2', { email: 'reader-2@example.com', properties: '{"plan":"pro","first":"Alan"}' }),
    ]);
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
  });

  it('sends a test of the rendered broadcast to each address through the email path, outside the broadcast', async () => {
    const { broadcastId: id } = await createDraft(t, {
      subject: 'Hello {{ user.properties.first | default: "there" }}',
      html: '<p>For {{ user.email }}</p>',
      replyToAddress: 'replies@example.com',
    });
    const res = await call('POST', `/broadcasts/${id}/test`, { emails: ['reader-1@example.com', 'preview@example.com', 'PREVIEW@example.com'] });
    expect(res.statusCode, res.body).toBe(200);
    const { sent } = res.json<{ sent: { email: string; trackingId: string }[] }>();
    expect(sent.map((s) => s.email)).toEqual(['reader-1@example.com', 'preview@example.com']);
    const mails = await smtp.waitFor(2);
    const to = (address: string) => mails.find((m) => m.envelope.to.includes(address))!.parsed;
    expect(to('reader-1@example.com')).toMatchObject({ subject: 'Hello Ada', html: expect.stringContaining('<p>For reader-1@example.com</p>') });
    expect(to('preview@example.com')).toMatchObject({ subject: 'Hello there', html: expect.stringContaining('<p>For preview@example.com</p>') });
    expect(to('preview@example.com').from?.value[0]).toEqual({ address: t.deps.config.defaultFromAddress, name: 'Clarion News' });
    expect(to('preview@example.com').replyTo?.value[0].address).toBe('replies@example.com');
    const logs = (await call('GET', `/logs/${sent.map((s) => s.trackingId).join(',')}`)).json<{ logs: { trackingId: string; type: string }[] }>().logs;
    expect(logs.map((l) => l.type)).toEqual(['newsletter', 'newsletter']);
    // Not the broadcast's: no recipients, no transition.
    expect((await call('GET', `/broadcasts/${id}/metrics`)).json().total).toBe(0);
    expect((await call('GET', `/broadcasts/${id}/transitions`)).json().transitions).toHaveLength(1);
    expect((await broadcast(id)).status).toBe('draft');
  });

  it('refuses a test without addresses, with more than 5, with a bad one, or of a broadcast that cannot be sent', async () => {
    const { broadcastId: id } = await createDraft(t);
    expectErrorBody(await call('POST', `/broadcasts/${id}/test`, { emails: [] }), 400, 'VALIDATION_FAILED', /emails/);
    expectErrorBody(await call('POST', `/broadcasts/${id}/test`, { emails: Array.from({ length: 6 }, (_, i) => `t${i}@example.com`) }), 400, 'VALIDATION_FAILED', /emails/);
    expectErrorBody(await call('POST', `/broadcasts/${id}/test`, { emails: ['nope'] }), 400, 'VALIDATION_FAILED', /emails\[0\] is not a valid email address/);
    const unverified = await createDraft(t, { fromAddress: 'news@unverified.example.org' });
    expectErrorBody(await call('POST', `/broadcasts/${unverified.broadcastId}/test`, { emails: ['a@example.com'] }), 400, 'UNVERIFIED_DOMAIN', /not verified/);
    await call('PATCH', `/broadcasts/${id}`, { type: null });
    expectErrorBody(await call('POST', `/broadcasts/${id}/test`, { emails: ['a@example.com'] }), 400, 'VALIDATION_FAILED', /type is not set/);
    expectErrorBody(await call('POST', '/broadcasts/0190f0c0-0000-7000-8000-000000000000/test', { emails: ['a@example.com'] }), 404, 'NOT_FOUND', /was not found/);
  });

  it('the freeze job runs after a send: recipients written and delivered at the clock\'s pace, an empty audience sent', async () => {
    const { broadcastId: id } = await createDraft(t);
    const { broadcastId: empty } = await createDraft(t, { audience: { filter: { 'properties.plan': 'nobody' } } });
    await call('POST', `/broadcasts/${id}/send`);
    await call('POST', `/broadcasts/${empty}/send`);
    await eventually(async () => (await call('GET', `/broadcasts/${id}/metrics`)).json().total === 2, 15_000, 'the audience frozen');
    await eventually(async () => (await broadcast(empty)).status === 'sent', 15_000, 'the empty broadcast sent');
    // Delivery's steps wait for the injected clock (the rate's slots, the look at the recipients in flight): move it along.
    await eventually(
      async () => {
        clock.advance(1000);
        return (await broadcast(id)).status === 'sent';
      },
      15_000,
      'the broadcast delivered and sent',
    );
    expect((await call('GET', `/broadcasts/${id}/metrics`)).json().counts).toMatchObject({ pending: 0, delivered: 2 });
  });

  it('the start sweep starts a scheduled broadcast once its sendAt has come, and its audience is frozen', async () => {
    const { broadcastId: id } = await createDraft(t);
    const sendAt = new Date(clock.now().getTime() + 5 * 60_000).toISOString();
    await call('POST', `/broadcasts/${id}/schedule`, { sendAt });
    clock.set(new Date(sendAt));
    await t.workers!.scheduleBroadcastStarts();
    await eventually(async () => (await broadcast(id)).status === 'sending', 15_000, 'the broadcast started');
    await eventually(async () => (await call('GET', `/broadcasts/${id}/metrics`)).json().total === 2, 15_000, 'its audience frozen');
    const transitions = (await call('GET', `/broadcasts/${id}/transitions`)).json<{ transitions: { operation: string; actor: string; at: string }[] }>().transitions;
    expect(transitions.at(-1)).toMatchObject({ operation: 'start', actor: 'system', at: sendAt });
  });
});
