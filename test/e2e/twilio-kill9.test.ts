// kill -9 of the server while a Twilio create is under way: Twilio made the text (or the call) but
// the answer never reached Clarion, and the dead process recorded no attempt. The re-run after the
// restart (the routing job's for a first attempt, the delivery.run job's for a retry) looks the
// resource up and records it instead of sending again: the peer holds exactly one.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killFixture } from '../helpers/kill-fixture.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type TwilioPeer, startTwilioPeer } from '../helpers/twilio-peer.js';
import { eventually } from '../helpers/wait.js';

const FROM = '+14155550100';
const SMS_TO = '+14155554001';
const CALL_TO = '+14155554002';

describe.each(STORAGE_KINDS)('kill -9 of the server during a Twilio create (%s)', (kind) => {
  const k = killFixture(kind, 'clarion-twilio-kill', 0);
  let peer: TwilioPeer;
  beforeAll(async () => {
    peer = await startTwilioPeer();
  });
  afterAll(async () => {
    await peer.close();
  });

  /** The server's stdout from now on (its log lines at info). */
  const stdoutOf = (child: ChildProcess) => {
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    return () => out;
  };
  const atPeer = (resource: 'Messages' | 'Calls', to: string) => ({
    made: [...peer.resources.values()].filter((r) => r.to === to).map((r) => r.sid as string),
    creates: peer.requests.filter((r) => r.resource === resource && r.method === 'POST' && r.params.To === to).length,
    lookups: peer.requests.filter((r) => r.resource === resource && r.method === 'GET' && r.params.To === to).length,
  });

  it('leaves one message (first attempt: the routing job runs again) and one call (a retry: its delivery.run job runs again)', { timeout: 240_000 }, async () => {
    const env = k.env({ TWILIO_ACCOUNT_SID: peer.accountSid, TWILIO_AUTH_TOKEN: peer.authToken, TWILIO_BASE_URL: peer.url, CLARION_DEFAULT_SMS_FROM: FROM, LOG_LEVEL: 'info' });
    const { child: first, port: port1, out } = await k.serve(env, /API key\s+clarion_sk_\S+/);
    const key = /API key\s+(clarion_sk_\S+)/.exec(out)![1];
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const send = async (port: number, channel: 'sms' | 'call', to: string) => {
      const res = await fetch(`http://127.0.0.1:${port}/send`, { method: 'POST', headers, body: JSON.stringify({ type: 'otp', to: { id: `user-${to}`, number: to }, [channel]: { message: 'Your code is 4711' } }) });
      expect(res.status).toBe(200);
      return ((await res.json()) as { trackingId: string }).trackingId;
    };
    const settled = (port: number, channel: 'sms' | 'call', trackingId: string) =>
      eventually(async () => {
        const record = ((await (await fetch(`http://127.0.0.1:${port}/logs/${trackingId}`, { headers })).json()) as { logs: Record<string, unknown>[] }).logs[0];
        return record?.[`${channel}_sent_at`] !== undefined || record?.[`${channel}_failed_at`] !== undefined ? record : undefined;
      }, 60_000, `${channel} ${trackingId} settled`);

    // The text's first attempt: Twilio makes it and never answers; the server dies.
    peer.createThenLoseNext({ after: 'hang' });
    const sms = await send(port1, 'sms', SMS_TO);
    await eventually(() => atPeer('Messages', SMS_TO).made.length > 0, 30_000, 'the text made at the peer');
    await k.kill(first);

    const { child: second, port: port2 } = await k.serve(env, /listening on/);
    const secondOut = stdoutOf(second);
    const smsRecord = await settled(port2, 'sms', sms);
    const texts = atPeer('Messages', SMS_TO);
    // Soft: a text sent twice still lets the call below be tried.
    expect.soft(texts.made).toHaveLength(1);
    expect.soft([texts.creates, texts.lookups]).toEqual([1, 1]);
    expect.soft(smsRecord.sms_sent_messageId).toBe(texts.made[0]);
    const smsAttempts = smsRecord.sms_attempts as Record<string, unknown>[];
    expect.soft(smsAttempts.map((a) => a.outcome)).toEqual(['success']);
    expect.soft(smsAttempts[0].response).toContain(texts.made[0]);

    // The call's first attempt is refused (429, retry in 1 s); its retry's create hangs; the server dies.
    peer.failNext({ status: 429, headers: { 'retry-after': '1' }, body: { code: 20429, message: 'Too Many Requests', status: 429 } });
    peer.createThenLoseNext({ after: 'hang' });
    const call = await send(port2, 'call', CALL_TO);
    await eventually(() => atPeer('Calls', CALL_TO).made.length > 0, 30_000, 'the call made at the peer');
    await k.kill(second);
    expect.soft(secondOut()).toContain(texts.made[0]);

    const { child: third, port: port3 } = await k.serve(env, /listening on/);
    try {
      const thirdOut = stdoutOf(third);
      const callRecord = await settled(port3, 'call', call);
      const calls = atPeer('Calls', CALL_TO);
      expect(calls.made).toHaveLength(1);
      expect([calls.creates, calls.lookups]).toEqual([2, 1]);
      const callAttempts = callRecord.call_attempts as Record<string, unknown>[];
      expect(callAttempts.map((a) => [a.outcome, a.provider_code])).toEqual([
        ['retry', '20429'],
        ['success', undefined],
      ]);
      expect(callAttempts[1].response).toContain(calls.made[0]);
      await eventually(async () => thirdOut().includes(calls.made[0]), 10_000, 'the log line with the call sid');
    } finally {
      const exited = third.exitCode === null && third.signalCode === null ? new Promise((r) => third.on('exit', r)) : null;
      third.kill('SIGTERM');
      await exited;
    }
  });
});
