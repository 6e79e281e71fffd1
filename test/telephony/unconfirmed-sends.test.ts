// An SMS or call whose create at Twilio lost its answer (timed out, connection dropped after the
// request was written, a 5xx after Twilio made it) is not sent again when Twilio did make it:
// before the retry Clarion lists Twilio's Messages/Calls and records the one the lost attempt
// created. The Twilio peer on loopback makes the resource and then loses the answer as told.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { captureLogs } from '../helpers/log-capture.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type TwilioPeer, startTwilioPeer, twilioPeerConfig } from '../helpers/twilio-peer.js';
import { eventually } from '../helpers/wait.js';

const FROM = '+14155550100';
const SERVER_ERROR = { status: 500, body: { code: 20500, message: 'Internal Server Error', status: 500 } };

describe.each(STORAGE_KINDS)('SMS and calls whose first answer was lost (%s)', (kind) => {
  let t: TestContext;
  let peer: TwilioPeer;
  const logs = captureLogs('info');
  let number = 0;
  /** A number of its own per test, so what the peer holds for it is that test's alone. */
  const nextNumber = () => `+1415555${String(2000 + ++number)}`;

  beforeAll(async () => {
    peer = await startTwilioPeer();
    // A hung create ends at this timeout; every other request is answered at once.
    t = await createTestContext(kind, { workers: true, logger: logs.logger, config: { ...twilioPeerConfig(peer, FROM), twilioRequestTimeoutMs: 2_000 } });
  });
  afterAll(async () => {
    await t.close();
    await peer.close();
  });

  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs?.[0] as Record<string, unknown> | undefined;
  const sent = async (channel: 'sms' | 'call', to: string, message = 'Your code is 4711') => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'otp', to: { id: `user-${to}`, number: to }, [channel]: { message } } });
    expect(res.statusCode, res.body).toBe(200);
    const trackingId = res.json<{ trackingId: string }>().trackingId;
    return eventually(async () => {
      const record = await log(trackingId);
      return record?.[`${channel}_sent_at`] !== undefined || record?.[`${channel}_failed_at`] !== undefined ? record : undefined;
    }, 20_000, `${channel} to ${to} settled`);
  };
  const resource = (channel: 'sms' | 'call') => (channel === 'sms' ? 'Messages' : 'Calls');
  /** The resources the peer made for `to`, and the creates and list reads it was asked for. */
  const atPeer = (channel: 'sms' | 'call', to: string) => ({
    made: [...peer.resources.values()].filter((r) => r.to === to).map((r) => r.sid as string),
    creates: peer.requests.filter((r) => r.resource === resource(channel) && r.method === 'POST' && r.params.To === to).length,
    lookups: peer.requests.filter((r) => r.resource === resource(channel) && r.method === 'GET' && r.params.To === to),
  });
  const providerIdField = (channel: 'sms' | 'call') => (channel === 'sms' ? 'sms_sent_messageId' : undefined);

  it.each([
    ['sms', 'timed out', { after: 'hang' }, 'TIMEOUT'],
    ['sms', 'lost its connection', { after: 'drop' }, 'PROVIDER_UNREACHABLE'],
    ['sms', 'got a 500', { after: 'fail', failure: SERVER_ERROR }, '20500'],
    ['call', 'timed out', { after: 'hang' }, 'TIMEOUT'],
    ['call', 'got a 500', { after: 'fail', failure: SERVER_ERROR }, '20500'],
  ] as const)('%s: a create that %s but that Twilio made is recorded, not sent again', async (channel, _how, lost, code) => {
    const to = nextNumber();
    peer.createThenLoseNext(lost);
    const record = await sent(channel, to);

    const { made, creates, lookups } = atPeer(channel, to);
    expect(made).toHaveLength(1);
    expect(creates).toBe(1);
    // The lookup names the numbers as Twilio's list takes them.
    expect(lookups).toHaveLength(1);
    expect(lookups[0].params).toMatchObject({ To: to, From: FROM });
    const [sid] = made;
    expect(record).toMatchObject({ [`${channel}_sent_from`]: FROM });
    const idField = providerIdField(channel);
    if (idField) expect(record[idField]).toBe(sid);
    const attempts = record[`${channel}_attempts`] as Record<string, unknown>[];
    expect(attempts.map((a) => [a.outcome, a.provider_code])).toEqual([
      ['retry', code],
      ['success', undefined],
    ]);
    expect(attempts[1].response).toContain(sid);
    expect(attempts[1].response).toContain('earlier attempt');
    expect(logs.lines.some((l) => l.sid === sid && String(l.msg).includes('recorded instead of sent again'))).toBe(true);
  });

  it.each(['sms', 'call'] as const)('%s: a create that timed out and that Twilio did not make is sent again', async (channel) => {
    const to = nextNumber();
    peer.createThenLoseNext({ after: 'hang', created: false });
    const record = await sent(channel, to);

    const { made, creates, lookups } = atPeer(channel, to);
    expect([made.length, creates, lookups.length]).toEqual([1, 2, 1]);
    const attempts = record[`${channel}_attempts`] as Record<string, unknown>[];
    expect(attempts.map((a) => a.outcome)).toEqual(['retry', 'success']);
    expect(attempts[1].response).toBe(`queued ${made[0]}`);
  });

  it('sms: when the lookup itself fails, the text is sent again (the documented fallback)', async () => {
    const to = nextNumber();
    peer.createThenLoseNext({ after: 'drop' });
    peer.failListNext(SERVER_ERROR);
    const record = await sent('sms', to);

    const { made, creates, lookups } = atPeer('sms', to);
    // Twilio made it twice: without a lookup, Clarion cannot tell.
    expect([made.length, creates, lookups.length]).toEqual([2, 2, 1]);
    expect(record.sms_sent_messageId).toBe(made[1]);
    expect(logs.lines.some((l) => l.deliveryId !== undefined && String(l.msg).includes('could not look up') && l.level === 40)).toBe(true);
  });

  it("sms: a matching message another delivery recorded is not taken for the lost attempt's", async () => {
    const to = nextNumber();
    const first = await sent('sms', to, 'Same words');
    peer.createThenLoseNext({ after: 'drop', created: false });
    const second = await sent('sms', to, 'Same words');

    const { made, creates } = atPeer('sms', to);
    expect([made.length, creates]).toEqual([2, 3]);
    expect(first.sms_sent_messageId).toBe(made[0]);
    expect(second.sms_sent_messageId).toBe(made[1]);
  });

  it('sms: a text with other words to the same number is not taken for it', async () => {
    const to = nextNumber();
    // Made by an attempt of another delivery whose answer was lost too, so no delivery recorded it.
    peer.createThenLoseNext({ after: 'fail', failure: { status: 400, body: { code: 21612, message: 'The To phone number is not currently reachable', status: 400 } } });
    await sent('sms', to, 'Other words');
    peer.createThenLoseNext({ after: 'drop', created: false });
    const record = await sent('sms', to, 'These words');

    const { made } = atPeer('sms', to);
    expect(made).toHaveLength(2);
    expect(record.sms_sent_messageId).toBe(made[1]);
  });

  it('sms: a retry after a 429 (Twilio refused, made nothing) does not look up', async () => {
    const to = nextNumber();
    peer.failNext({ status: 429, body: { code: 20429, message: 'Too Many Requests', status: 429 } });
    const record = await sent('sms', to);

    const { made, lookups } = atPeer('sms', to);
    expect([made.length, lookups.length]).toEqual([1, 0]);
    expect(record.sms_sent_messageId).toBe(made[0]);
  });
});
