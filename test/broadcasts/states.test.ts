// The broadcast state machine on both engines. Every operation a caller can ask for is tried in
// every state (and archived where a state can be): the expected outcomes are written out here
// from the spec's table (not read from the code's), each allowed one answers 200 with the next
// state and records its transition with time and actor, each other one answers 409 CONFLICT
// naming the current state. Then the service's own transitions: the start of a scheduled
// broadcast at sendAt (injected clock), completion when no recipient is pending, pauses with
// their reasons, and a race of two sends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callAs, createDraft, seedUsers, userRow } from '../helpers/broadcasts.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { verifySenderDomain } from '../helpers/sender-domains.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

type State = 'draft' | 'scheduled' | 'sending' | 'paused' | 'sent' | 'canceled';
/** A state, archived when marked with `*`. */
type StateKey = State | 'draft*' | 'paused*' | 'sent*' | 'canceled*';
type Operation = 'update' | 'delete' | 'schedule' | 'send' | 'pause' | 'resume' | 'cancel' | 'archive' | 'unarchive';

const STATES: StateKey[] = ['draft', 'scheduled', 'sending', 'paused', 'sent', 'canceled', 'draft*', 'paused*', 'sent*', 'canceled*'];

/** Operation -> state -> the state it leads to ('deleted' for a delete); a state not listed refuses it. */
const EXPECTED: Record<Operation, Partial<Record<StateKey, StateKey | 'deleted'>>> = {
  update: { draft: 'draft', 'draft*': 'draft*' },
  delete: { draft: 'deleted', 'draft*': 'deleted' },
  schedule: { draft: 'scheduled' },
  send: { draft: 'sending' },
  pause: { sending: 'paused' },
  resume: { paused: 'sending' },
  cancel: { scheduled: 'draft', sending: 'canceled', paused: 'canceled', 'paused*': 'canceled*' },
  archive: { draft: 'draft*', paused: 'paused*', sent: 'sent*', canceled: 'canceled*' },
  unarchive: { 'draft*': 'draft', 'paused*': 'paused', 'sent*': 'sent', 'canceled*': 'canceled' },
};

describe.each(STORAGE_KINDS)('broadcast states (%s)', (kind) => {
  let t: TestContext;
  let dns: DnsTestServer;
  const clock = new ManualClock(new Date('2026-04-01T09:00:00.000Z'));
  const scope = () => ({ accountId: t.account.accountId, envId: t.account.clientId });
  const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, headers?: Record<string, string>) => callAs(t, method, url, payload, headers);
  const later = (ms = 3600_000) => new Date(clock.now().getTime() + ms).toISOString();
  const statusOf = async (id: string) => {
    const b = (await call('GET', `/broadcasts/${id}`)).json<{ status: State; archivedAt?: string }>();
    return `${b.status}${b.archivedAt ? '*' : ''}`;
  };
  const history = async (id: string) => (await call('GET', `/broadcasts/${id}/transitions`)).json<{ transitions: { operation: string; from: string; to: string; actor: string; at: string; pausedReason?: string }[] }>().transitions;
  const ok = async (method: 'POST' | 'PATCH', url: string, payload?: unknown) => {
    const res = await call(method, url, payload);
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ status: State; pausedReason?: string; broadcastId: string }>();
  };

  /** A broadcast brought into `key` through the API (and, for sent, its freeze). */
  async function inState(key: StateKey): Promise<string> {
    const state = key.replace('*', '') as State;
    const { broadcastId: id } = await createDraft(t, { audience: { filter: { 'properties.plan': state === 'sent' ? 'nobody' : 'pro' } } });
    if (state === 'scheduled') await ok('POST', `/broadcasts/${id}/schedule`, { sendAt: later() });
    if (['sending', 'paused', 'sent', 'canceled'].includes(state)) await ok('POST', `/broadcasts/${id}/send`);
    if (state === 'paused') await ok('POST', `/broadcasts/${id}/pause`);
    if (state === 'canceled') await ok('POST', `/broadcasts/${id}/cancel`);
    if (state === 'sent') expect(await t.services.broadcasts.sending.freeze(scope(), id)).toBe('done');
    if (key.endsWith('*')) await ok('POST', `/broadcasts/${id}/archive`);
    expect(await statusOf(id)).toBe(key);
    return id;
  }

  function request(operation: Operation, id: string) {
    if (operation === 'update') return call('PATCH', `/broadcasts/${id}`, { subject: 'Changed' });
    if (operation === 'delete') return call('DELETE', `/broadcasts/${id}`);
    if (operation === 'schedule') return call('POST', `/broadcasts/${id}/schedule`, { sendAt: later() });
    return call('POST', `/broadcasts/${id}/${operation}`);
  }

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(kind, { clock, config: { dnsServer: dns.address, sendingDomain: 'mail.clarion.test' } });
    await seedUsers(t, [userRow(t, 'pro-1', { email: 'pro-1@example.com', properties: '{"plan":"pro"}' })]);
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  for (const operation of Object.keys(EXPECTED) as Operation[]) {
    it(`${operation}: allowed exactly where the table says, 409 CONFLICT naming the state elsewhere`, async () => {
      for (const key of STATES) {
        const id = await inState(key);
        clock.advance(1000);
        const res = await request(operation, id);
        const expected = EXPECTED[operation][key];
        const where = `${operation} in ${key}`;
        if (expected === undefined) {
          const body = expectErrorBody(res, 409, 'CONFLICT', new RegExp(`^This broadcast is ${key.replace('*', '')}\\b`));
          expect(body.error.fix, where).toBeTruthy();
          expect(await statusOf(id), where).toBe(key);
          continue;
        }
        expect(res.statusCode, `${where}: ${res.body}`).toBe(200);
        if (expected === 'deleted') {
          expect((await call('GET', `/broadcasts/${id}`)).statusCode, where).toBe(404);
          continue;
        }
        expect(await statusOf(id), where).toBe(expected);
        const last = (await history(id)).at(-1)!;
        expect(last, where).toMatchObject({ operation, from: key.replace('*', ''), to: expected.replace('*', ''), at: clock.now().toISOString() });
        expect(last.actor, where).toMatch(/^apiKey:.+/);
      }
    });
  }

  it('records every transition with its time and actor, and clears schedule and pause reason on the way', async () => {
    const basic = { authorization: `Basic ${Buffer.from(`${t.account.clientId}:${t.account.clientSecret}`).toString('base64')}` };
    const { broadcastId: id } = await createDraft(t);
    const steps: [string, unknown?][] = [['schedule', { sendAt: later() }], ['cancel'], ['send'], ['pause'], ['resume'], ['cancel'], ['archive'], ['unarchive']];
    for (const [op, body] of steps) {
      clock.advance(60_000);
      const res = await call('POST', `/broadcasts/${id}/${op}`, body, basic);
      expect(res.statusCode, res.body).toBe(200);
      if (op === 'cancel' && res.json().status === 'draft') expect(res.json()).not.toHaveProperty('scheduleAt');
      if (op === 'resume') expect(res.json()).not.toHaveProperty('pausedReason');
    }
    const all = await history(id);
    expect(all.map((s) => [s.operation, s.from, s.to])).toEqual([
      ['create', 'new', 'draft'],
      ['schedule', 'draft', 'scheduled'],
      ['cancel', 'scheduled', 'draft'],
      ['send', 'draft', 'sending'],
      ['pause', 'sending', 'paused'],
      ['resume', 'paused', 'sending'],
      ['cancel', 'sending', 'canceled'],
      ['archive', 'canceled', 'canceled'],
      ['unarchive', 'canceled', 'canceled'],
    ]);
    expect(all[0].actor).toMatch(/^apiKey:/);
    expect(all.slice(1).every((s) => s.actor === `basic:${t.account.clientId}`)).toBe(true);
    expect(all[4].pausedReason).toBe('PAUSED_BY_USER');
    expect(all.map((s) => s.at)).toEqual([...all.map((s) => s.at)].sort());
    expect(new Set(all.map((s) => s.at)).size).toBe(all.length);
  });

  it('start: a scheduled broadcast starts sending at sendAt (the start job), not before, recorded as the system', async () => {
    const { broadcastId: id } = await createDraft(t);
    const sendAt = later(30 * 60_000);
    await ok('POST', `/broadcasts/${id}/schedule`, { sendAt });
    clock.advance(29 * 60_000);
    await t.services.broadcasts.sending.startDue();
    expect(await statusOf(id)).toBe('scheduled');
    clock.set(new Date(sendAt));
    expect(await t.services.broadcasts.sending.startDue()).toBeGreaterThanOrEqual(1);
    expect(await statusOf(id)).toBe('sending');
    expect((await history(id)).at(-1)).toMatchObject({ operation: 'start', from: 'scheduled', to: 'sending', actor: 'system', at: sendAt });
    // A canceled schedule is not started.
    const { broadcastId: dropped } = await createDraft(t);
    await ok('POST', `/broadcasts/${dropped}/schedule`, { sendAt: later(60_000) });
    await ok('POST', `/broadcasts/${dropped}/cancel`);
    clock.advance(120_000);
    await t.services.broadcasts.sending.startDue();
    expect(await statusOf(dropped)).toBe('draft');
  });

  it('complete: sending -> sent once the frozen audience has no one pending', async () => {
    const { broadcastId: id } = await createDraft(t, { audience: { filter: { 'properties.plan': 'nobody' } } });
    await ok('POST', `/broadcasts/${id}/send`);
    expect(await t.services.broadcasts.sending.freeze(scope(), id)).toBe('done');
    expect(await statusOf(id)).toBe('sent');
    expect((await history(id)).at(-1)).toMatchObject({ operation: 'complete', from: 'sending', to: 'sent', actor: 'system' });
    // With a pending recipient it stays sending (delivery sends it: not built yet).
    const { broadcastId: pending } = await createDraft(t);
    await ok('POST', `/broadcasts/${pending}/send`);
    expect(await t.services.broadcasts.sending.freeze(scope(), pending)).toBe('done');
    expect(await statusOf(pending)).toBe('sending');
  });

  it('pauses by the service carry their reason and the system actor; resume clears it', async () => {
    for (const reason of ['PLAN_EXCEEDED', 'REPUTATION_GUARD'] as const) {
      const { broadcastId: id } = await createDraft(t);
      await ok('POST', `/broadcasts/${id}/send`);
      await t.services.broadcasts.service.pauseBySystem(scope(), id, reason);
      expect((await call('GET', `/broadcasts/${id}`)).json()).toMatchObject({ status: 'paused', pausedReason: reason });
      expect((await history(id)).at(-1)).toMatchObject({ operation: 'pause', to: 'paused', pausedReason: reason, actor: 'system' });
      await expect(t.services.broadcasts.service.pauseBySystem(scope(), id, reason)).rejects.toMatchObject({ code: 'CONFLICT', message: expect.stringMatching(/^This broadcast is paused/) });
      // The service's operations are the service's: a caller cannot apply them, nor the service a caller's.
      await expect(t.services.broadcasts.service.transitions.apply(scope(), id, 'complete', 'apiKey:x')).rejects.toThrow(/complete is applied by the service only/);
      await expect(t.services.broadcasts.service.transitions.apply(scope(), id, 'resume', 'system')).rejects.toThrow(/resume is applied by a caller only/);
      const resumed = await ok('POST', `/broadcasts/${id}/resume`);
      expect(resumed.status).toBe('sending');
      expect(resumed).not.toHaveProperty('pausedReason');
    }
  });

  it('a sender no longer verified when the broadcast starts pauses it (UNVERIFIED_DOMAIN); resume is refused until it is verified again', async () => {
    await verifySenderDomain(t.app, t.auth, dns, 'gone.example.test');
    const { broadcastId: id } = await createDraft(t, { fromAddress: 'news@gone.example.test' });
    await ok('POST', `/broadcasts/${id}/schedule`, { sendAt: later(60_000) });
    expect((await call('DELETE', '/domains/gone.example.test')).statusCode).toBe(200);
    clock.advance(60_000);
    await t.services.broadcasts.sending.startDue();
    expect(await t.services.broadcasts.sending.freeze(scope(), id)).toBe('done');
    expect((await call('GET', `/broadcasts/${id}`)).json()).toMatchObject({ status: 'paused', pausedReason: 'UNVERIFIED_DOMAIN' });
    expect((await call('GET', `/broadcasts/${id}/metrics`)).json().total).toBe(0);
    expectErrorBody(await call('POST', `/broadcasts/${id}/resume`), 400, 'UNVERIFIED_DOMAIN', /gone\.example\.test is not verified/);
    await verifySenderDomain(t.app, t.auth, dns, 'gone.example.test');
    expect((await ok('POST', `/broadcasts/${id}/resume`)).status).toBe('sending');
    expect(await t.services.broadcasts.sending.freeze(scope(), id)).toBe('done');
    expect((await call('GET', `/broadcasts/${id}/metrics`)).json().counts.pending).toBe(1);
  });

  it('an audience over the default sender limit when frozen pauses it (AUDIENCE_LIMITS_EXCEEDED); it cannot resume', async () => {
    await seedUsers(t, Array.from({ length: 10 }, (_, i) => userRow(t, `grow-${i}`, { email: `grow-${i}@example.com`, properties: '{"cohort":"grow"}' })));
    const { broadcastId: id } = await createDraft(t, { audience: { filter: { 'properties.cohort': 'grow' } } });
    await ok('POST', `/broadcasts/${id}/schedule`, { sendAt: later(60_000) });
    await seedUsers(t, [userRow(t, 'grow-10', { email: 'grow-10@example.com', properties: '{"cohort":"grow"}' })]);
    clock.advance(60_000);
    await t.services.broadcasts.sending.startDue();
    expect(await t.services.broadcasts.sending.freeze(scope(), id)).toBe('done');
    expect((await call('GET', `/broadcasts/${id}`)).json()).toMatchObject({ status: 'paused', pausedReason: 'AUDIENCE_LIMITS_EXCEEDED' });
    expectErrorBody(await call('POST', `/broadcasts/${id}/resume`), 409, 'CONFLICT', /paused \(AUDIENCE_LIMITS_EXCEEDED\): its audience is over the 10 recipients/);
    // Archiving keeps the reason it is paused for.
    expect(await ok('POST', `/broadcasts/${id}/archive`)).toMatchObject({ status: 'paused', pausedReason: 'AUDIENCE_LIMITS_EXCEEDED' });
    expect(await ok('POST', `/broadcasts/${id}/unarchive`)).toMatchObject({ status: 'paused', pausedReason: 'AUDIENCE_LIMITS_EXCEEDED' });
    expect((await history(id)).slice(-2).map((s) => s.pausedReason)).toEqual([undefined, undefined]);
    expect((await ok('POST', `/broadcasts/${id}/cancel`)).status).toBe('canceled');
    expect((await call('GET', `/broadcasts/${id}/metrics`)).json().counts).toMatchObject({ pending: 0, skipped: 11 });
  });

  it('two sends of one draft at once: one is applied, the other refused with the state it met', async () => {
    const { broadcastId: id } = await createDraft(t);
    const answers = await Promise.all([request('send', id), request('send', id), request('pause', id)]);
    const sends = answers.slice(0, 2).map((r) => r.statusCode).sort();
    expect(sends).toEqual([200, 409]);
    expect(answers.slice(0, 2).find((r) => r.statusCode === 409)!.json().error.message).toMatch(/^This broadcast is (sending|paused)/);
    expect((await history(id)).filter((s) => s.operation === 'send')).toHaveLength(1);
  });
});
