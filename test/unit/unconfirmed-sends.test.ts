// The rule that takes a Twilio resource for an attempt whose answer was lost, and which earlier
// attempts count as lost; and TWILIO_REQUEST_TIMEOUT_MS.
import { describe, expect, it } from 'vitest';
import { telephonySettings } from '../../src/channels/telephony/settings.js';
import { CLOCK_SKEW_MS, matching } from '../../src/channels/telephony/unconfirmed-sends.js';
import type { TwilioMessage } from '../../src/channels/telephony/twilio-client.js';
import { unconfirmedSince } from '../../src/modules/sending/executors/unconfirmed-twilio.js';
import type { AttemptRow } from '../../src/modules/sending/sending.tables.js';

const since = new Date('2024-05-01T12:00:00.000Z');
const rfc2822 = (ms: number) => new Date(ms).toUTCString().replace('GMT', '+0000');
const message = (sid: string, fields: Partial<TwilioMessage> = {}): TwilioMessage => ({
  sid,
  status: 'queued',
  to: '+14155550123',
  from: '+14155550100',
  body: 'Code 4711',
  direction: 'outbound-api',
  date_created: rfc2822(since.getTime()),
  ...fields,
});
const send = { kind: 'sms' as const, to: '+14155550123', from: '+14155550100', body: 'Code 4711', since };

describe('matching a lost attempt to a Twilio resource', () => {
  it('takes only outbound-api resources with the same numbers and text, created no earlier than the skew allows', () => {
    const listed = [
      message('SMinbound', { direction: 'inbound' }),
      message('SMotherTo', { to: '+14155550999' }),
      message('SMotherFrom', { from: '+14155550999' }),
      message('SMotherBody', { body: 'Code 0000' }),
      message('SMtooEarly', { date_created: rfc2822(since.getTime() - CLOCK_SKEW_MS - 1000) }),
      message('SMundated', { date_created: null }),
      message('SMlater', { date_created: rfc2822(since.getTime() + 5000) }),
      message('SMskewed', { date_created: rfc2822(since.getTime() - CLOCK_SKEW_MS) }),
    ];
    expect(matching(listed, send).map((m) => m.resource.sid)).toEqual(['SMskewed', 'SMlater']);
  });

  it('compares no body for a call', () => {
    expect(matching([message('CAone', { body: undefined })], { kind: 'call', to: send.to, from: send.from, since }).map((m) => m.resource.sid)).toEqual(['CAone']);
  });
});

describe('which earlier attempts may have created the resource', () => {
  const attempt = (n: number, outcome: AttemptRow['outcome'], code: string | null): AttemptRow => ({
    id: `a${n}`,
    delivery_id: 'd',
    attempt: n,
    started_at: new Date(since.getTime() + n * 1000).toISOString(),
    duration_ms: 1,
    outcome,
    provider_code: code,
    detail: null,
  });

  it('every retried attempt but a 429, from the first of them', () => {
    expect(unconfirmedSince([])).toBeUndefined();
    expect(unconfirmedSince([attempt(1, 'retry', '20429'), attempt(2, 'retry', '429')])).toBeUndefined();
    expect(unconfirmedSince([attempt(1, 'retry', '20429'), attempt(2, 'retry', 'TIMEOUT'), attempt(3, 'retry', '20500')])?.toISOString()).toBe(attempt(2, 'retry', null).started_at);
  });
});

describe('TWILIO_REQUEST_TIMEOUT_MS', () => {
  const fail = (message: string) => new Error(message);
  it('is read as milliseconds, and refused when not a positive number', () => {
    expect(telephonySettings({ TWILIO_REQUEST_TIMEOUT_MS: '2500' }, fail).twilioRequestTimeoutMs).toBe(2500);
    expect(telephonySettings({}, fail).twilioRequestTimeoutMs).toBeUndefined();
    expect(() => telephonySettings({ TWILIO_REQUEST_TIMEOUT_MS: '0' }, fail)).toThrow(/TWILIO_REQUEST_TIMEOUT_MS/);
    expect(() => telephonySettings({ TWILIO_REQUEST_TIMEOUT_MS: '5s' }, fail)).toThrow(/TWILIO_REQUEST_TIMEOUT_MS/);
  });
});
