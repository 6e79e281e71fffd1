import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TwilioClient } from '../../src/channels/telephony/twilio-client.js';
import { sayTwiml } from '../../src/channels/telephony/twiml.js';
import { mediaUrlProblem, smsEncoding } from '../../src/channels/telephony/sms-content.js';
import { DeliveryError } from '../../src/channels/types.js';
import { type TwilioPeer, startTwilioPeer } from '../helpers/twilio-peer.js';

describe('Twilio REST adapter against a Twilio-protocol peer', () => {
  let peer: TwilioPeer;
  let client: TwilioClient;
  beforeAll(async () => {
    peer = await startTwilioPeer();
    client = new TwilioClient({ accountSid: peer.accountSid, authToken: peer.authToken, baseUrl: peer.url });
  });
  afterAll(() => peer.close());
  beforeEach(() => {
    peer.requests.length = 0;
  });

  const failure = async (work: Promise<unknown>): Promise<DeliveryError> => {
    const err = await work.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DeliveryError);
    return err as DeliveryError;
  };

  it('sends an SMS as a form body with Basic AccountSid:AuthToken and returns the SID', async () => {
    const sent = await client.sendMessage({ to: '+14155550123', from: '+14155550100', body: 'Hello & welcome', statusCallback: 'https://clarion.example/cb' });
    expect(sent.sid).toMatch(/^SM[0-9a-f]{32}$/);
    const [req] = peer.requests;
    expect(req).toMatchObject({ method: 'POST', resource: 'Messages', authorized: true, path: `/2010-04-01/Accounts/${peer.accountSid}/Messages.json` });
    expect(req.params).toEqual({ To: '+14155550123', From: '+14155550100', Body: 'Hello & welcome', StatusCallback: 'https://clarion.example/cb' });
  });

  it('sends an MMS with one MediaUrl field per media', async () => {
    await client.sendMessage({ to: '+14155550123', from: '+14155550100', body: 'pics', mediaUrls: ['https://cdn.example.com/a.png', 'https://cdn.example.com/b.jpg'] });
    expect(peer.requests[0].params.MediaUrl).toEqual(['https://cdn.example.com/a.png', 'https://cdn.example.com/b.jpg']);
  });

  it('places a call with escaped TwiML and the status callback events', async () => {
    const call = await client.createCall({
      to: '+14155550123',
      from: '+14155550100',
      twiml: sayTwiml('Tom & "Jerry" <3'),
      statusCallback: 'https://clarion.example/call',
      statusCallbackEvents: ['initiated', 'completed'],
    });
    expect(call.sid).toMatch(/^CA/);
    expect(peer.requests[0].params).toMatchObject({
      Twiml: '<Response><Say>Tom &amp; &quot;Jerry&quot; &lt;3</Say></Response>',
      StatusCallback: 'https://clarion.example/call',
      StatusCallbackEvent: ['initiated', 'completed'],
    });
  });

  it('maps a 4xx with a Twilio error code to a permanent, readable failure', async () => {
    peer.failNext({ status: 400, body: { code: 21211, message: "The 'To' number 123 is not a valid phone number.", status: 400 } });
    const invalidTo = await failure(client.sendMessage({ to: '+1', from: '+14155550100', body: 'x' }));
    expect(invalidTo).toMatchObject({ code: 'INVALID_TO_NUMBER', retryable: false });
    expect(invalidTo.options.providerCode).toBe('21211');

    peer.failNext({ status: 400, body: { code: 21610, message: 'Attempt to send to unsubscribed recipient', status: 400 } });
    expect(await failure(client.sendMessage({ to: '+14155550123', from: '+14155550100', body: 'x' }))).toMatchObject({ code: 'RECIPIENT_UNSUBSCRIBED', retryable: false });

    peer.failNext({ status: 400, body: { code: 29999, message: 'Something new', status: 400 } });
    expect(await failure(client.sendMessage({ to: '+14155550123', from: '+14155550100', body: 'x' }))).toMatchObject({ code: 'PROVIDER_REJECTED', retryable: false });
  });

  it('treats 429 (with Retry-After) and 5xx as retryable', async () => {
    peer.failNext({ status: 429, body: { code: 20429, message: 'Too Many Requests', status: 429 }, headers: { 'retry-after': '7' } });
    const limited = await failure(client.sendMessage({ to: '+14155550123', from: '+14155550100', body: 'x' }));
    expect(limited).toMatchObject({ code: 'PROVIDER_RATE_LIMITED', retryable: true });
    expect(limited.options.retryAfterMs).toBe(7000);
    // Not delay-seconds: no Retry-After at all ("" read by Number was 0, "-5" a past date).
    for (const value of ['', '1.5', 'soon']) {
      peer.failNext({ status: 429, body: { code: 20429, message: 'Too Many Requests', status: 429 }, headers: { 'retry-after': value } });
      expect((await failure(client.sendMessage({ to: '+14155550123', from: '+14155550100', body: 'x' }))).options.retryAfterMs, JSON.stringify(value)).toBeUndefined();
    }

    peer.failNext({ status: 503 });
    expect(await failure(client.sendMessage({ to: '+14155550123', from: '+14155550100', body: 'x' }))).toMatchObject({ code: 'PROVIDER_UNAVAILABLE', retryable: true });
  });

  it('refuses wrong credentials as a permanent auth failure, and an unreachable API as retryable', async () => {
    const wrong = new TwilioClient({ accountSid: peer.accountSid, authToken: 'not-the-token', baseUrl: peer.url });
    expect(await failure(wrong.sendMessage({ to: '+14155550123', from: '+14155550100', body: 'x' }))).toMatchObject({ code: 'PROVIDER_AUTH_FAILED', retryable: false });
    const down = new TwilioClient({ accountSid: peer.accountSid, authToken: peer.authToken, baseUrl: 'http://127.0.0.1:1' });
    expect(await failure(down.sendMessage({ to: '+14155550123', from: '+14155550100', body: 'x' }))).toMatchObject({ code: 'PROVIDER_UNREACHABLE', retryable: true });
  });

  it('reads a call resource and the account numbers', async () => {
    const call = await client.createCall({ to: '+14155550123', from: '+14155550100', twiml: sayTwiml('hi') });
    peer.resources.get(call.sid)!.price = '-0.01400';
    expect((await client.fetchCall(call.sid)).price).toBe('-0.01400');
    peer.ownedNumbers.add('+14155550100');
    expect(await client.ownsNumber('+14155550100')).toBe(true);
    expect(await client.ownsNumber('+14155550199')).toBe(false);
  });
});

describe('SMS content rules', () => {
  it('counts GSM-7 and UCS-2 segments', () => {
    expect(smsEncoding('Hello world')).toEqual({ encoding: 'GSM-7', segments: 1 });
    expect(smsEncoding('a'.repeat(160))).toEqual({ encoding: 'GSM-7', segments: 1 });
    expect(smsEncoding('a'.repeat(161))).toEqual({ encoding: 'GSM-7', segments: 2 });
    expect(smsEncoding('Hi 😀')).toEqual({ encoding: 'UCS-2', segments: 1 });
    expect(smsEncoding('😀'.repeat(40))).toEqual({ encoding: 'UCS-2', segments: 2 });
  });

  it('accepts only public https media', () => {
    expect(mediaUrlProblem('https://cdn.example.com/a.png')).toBeUndefined();
    expect(mediaUrlProblem('http://cdn.example.com/a.png')).toMatch(/https/);
    expect(mediaUrlProblem('https://127.0.0.1/a.png')).toMatch(/loopback/);
    expect(mediaUrlProblem('https://169.254.169.254/latest')).toMatch(/link-local/);
    expect(mediaUrlProblem('https://localhost/a.png')).toMatch(/public/);
    expect(mediaUrlProblem('https://user:pw@cdn.example.com/a.png')).toMatch(/credentials/);
    expect(mediaUrlProblem('not a url')).toMatch(/not a URL/);
  });
});
