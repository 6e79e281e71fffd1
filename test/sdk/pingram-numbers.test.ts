import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devCarrierCredentials } from '../../src/channels/telephony/endpoint.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { sdkRefusal } from '../helpers/error-body.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type TwilioPeer, startTwilioPeer, twilioPeerConfig } from '../helpers/twilio-peer.js';
import { eventually } from '../helpers/wait.js';

/** The development pool of an area code (README: SMS and calls, Numbers): NPA-555-0100 to 0199, in order. */
const pool = (npa: string) => Array.from({ length: 100 }, (_, line) => `+1${npa}55501${String(line).padStart(2, '0')}`);

/**
 * The pingram SDK's NumbersApi (searchAvailable, orderNumber, releaseNumber, listReleased, list)
 * against the started server: with the development carrier (its documented pool, sends over its
 * Twilio-protocol REST API), and with Twilio (a loopback peer speaking Twilio's REST protocol).
 */
describe.each(STORAGE_KINDS)('pingram SDK: numbers with the development carrier (%s)', (kind) => {
  let t: TestContext;
  let clock: ManualClock;
  let client: Pingram;
  let devNumber: string;
  const smsFrom = async (trackingId: string) =>
    eventually(async () => {
      const record = (await client.logs.getLogsByTrackingIds(trackingId)).logs[0] as unknown as Record<string, unknown> | undefined;
      return record?.sms_sent_from as string | undefined;
    }, 15_000, 'sms_sent_from');

  beforeAll(async () => {
    clock = new ManualClock(new Date());
    t = await createTestContext(kind, { workers: true, clock });
    t.deps.config.publicUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    client = new Pingram({ apiKey: t.account.apiKey, baseUrl: t.deps.config.publicUrl });
    devNumber = (await client.numbers.list()).numbers[0].phoneNumber;
  });
  afterAll(() => t?.close());

  it('searchAvailable answers the documented pool in order, less the numbers accounts hold', async () => {
    const us = await client.numbers.searchAvailable('US');
    expect(us.numbers.map((n) => n.phoneNumber)).toEqual(pool('415').filter((n) => n !== devNumber).slice(0, 10));
    expect(us.numbers[0]).toEqual({ phoneNumber: us.numbers[0].phoneNumber, phoneNumberType: 'local', features: ['sms', 'mms', 'voice'], monthlyPrice: 0 });

    const ny = await client.numbers.searchAvailable('us', 'sms, voice', '212', 3);
    expect(ny.numbers.map((n) => n.phoneNumber)).toEqual(pool('212').filter((n) => n !== devNumber).slice(0, 3));
    expect((await client.numbers.searchAvailable('CA', undefined, '416', 2)).numbers.map((n) => n.phoneNumber)).toEqual(['+14165550100', '+14165550101']);
    // A Canadian area code has no US numbers, as with Twilio.
    expect((await client.numbers.searchAvailable('US', undefined, '416')).numbers).toEqual([]);

    await client.numbers.orderNumber({ phoneNumber: '+12125550100' });
    expect((await client.numbers.searchAvailable('US', undefined, '212', 1)).numbers.map((n) => n.phoneNumber)).toEqual(['+12125550101']);
  });

  it('searchAvailable refuses a country outside the pool, an unknown feature and a limit over 50', async () => {
    const france = await sdkRefusal(client.numbers.searchAvailable('FR'));
    expect([france.status, france.body.error.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect(france.body.error.message).toBe('The development carrier has no numbers in FR.');
    const fax = await sdkRefusal(client.numbers.searchAvailable('US', 'sms,fax'));
    expect([fax.status, fax.body.error.message]).toEqual([400, 'features: "fax" is not a number feature.']);
    expect((await sdkRefusal(client.numbers.searchAvailable('US', undefined, undefined, 51))).status).toBe(400);
  });

  it('releaseNumber stops a number sending; listReleased lists it; orderNumber reactivates it with its createdAt', async () => {
    const ordered = (await client.numbers.list()).numbers.find((n) => n.phoneNumber === '+12125550100')!;
    const before = await client.send({ type: 'otp', to: { id: 'ada', number: '+14155550123' }, sms: { message: 'one', from: '+12125550100' } });
    expect(await smsFrom(before.trackingId)).toBe('+12125550100');

    const released = await client.numbers.releaseNumber('+12125550100');
    expect(released).toEqual({ phoneNumber: '+12125550100', released: true, releasedAt: clock.now().toISOString() });
    expect((await client.numbers.list()).numbers.map((n) => n.phoneNumber)).toEqual([devNumber]);
    expect((await client.numbers.listReleased()).numbers).toEqual([
      { ...ordered, billingStatus: 'released', nextBillingDate: '', releasedAt: released.releasedAt },
    ]);
    // Released twice: the same release.
    expect(await client.numbers.releaseNumber('+12125550100')).toEqual(released);

    // It no longer sends: a send naming it is refused, and the carrier refuses it as a sender.
    const after = await sdkRefusal(client.send({ type: 'otp', to: { id: 'ada' }, sms: { message: 'two', from: '+12125550100' } }));
    expect([after.status, after.body.error.message]).toEqual([400, 'sms.from +12125550100 is not a number of this account.']);
    const { accountSid, authToken } = devCarrierCredentials(t.deps.secrets);
    const direct = await fetch(`${t.deps.config.publicUrl}/dev-carrier/2010-04-01/Accounts/${accountSid}/Messages.json`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ To: '+14155550123', From: '+12125550100', Body: 'sneak' }).toString(),
    });
    expect([direct.status, ((await direct.json()) as { code: number }).code]).toEqual([400, 21606]);

    clock.advance(60_000);
    await client.numbers.orderNumber({ phoneNumber: '+12125550100' });
    expect((await client.numbers.list()).numbers.find((n) => n.phoneNumber === '+12125550100')).toEqual(ordered);
    expect((await client.numbers.listReleased()).numbers).toEqual([]);
  });

  it("keeps a released number the account's for 14 days, then lets another account order it", async () => {
    const other = await t.newAccount('Neighbour');
    const theirs = new Pingram({ apiKey: other.apiKey, baseUrl: t.deps.config.publicUrl! });
    await client.numbers.releaseNumber('+12125550100');
    const held = await sdkRefusal(theirs.numbers.orderNumber({ phoneNumber: '+12125550100' }));
    expect([held.status, held.body.error.code]).toEqual([409, 'CONFLICT']);
    const foreign = await sdkRefusal(theirs.numbers.releaseNumber(devNumber));
    expect([foreign.status, foreign.body.error.code]).toEqual([404, 'NOT_FOUND']);

    clock.advance(15 * 86_400_000);
    expect((await client.numbers.listReleased()).numbers).toEqual([]);
    expect((await theirs.numbers.orderNumber({ phoneNumber: '+12125550100' })).phoneNumber).toBe('+12125550100');
    expect((await theirs.numbers.list()).numbers.map((n) => n.phoneNumber)).toContain('+12125550100');
    const gone = await sdkRefusal(client.numbers.orderNumber({ phoneNumber: '+12125550100' }));
    expect(gone.status).toBe(409);
  });

  it('does not give a new development number behind the back of an account that released its own', async () => {
    await client.numbers.releaseNumber(devNumber);
    expect((await client.numbers.list()).numbers).toEqual([]);
    expect((await client.numbers.listReleased()).numbers.map((n) => n.phoneNumber)).toEqual([devNumber]);
  });
});

describe.each(STORAGE_KINDS)('pingram SDK: numbers with Twilio (%s)', (kind) => {
  let t: TestContext;
  let peer: TwilioPeer;
  let client: Pingram;
  const SF = '+14155550142';

  beforeAll(async () => {
    peer = await startTwilioPeer();
    peer.stock.push(
      { phone_number: SF, friendly_name: '(415) 555-0142', locality: 'San Francisco', region: 'CA', iso_country: 'US', capabilities: { sms: true, mms: true, voice: true } },
      { phone_number: '+14155550143', friendly_name: '(415) 555-0143', locality: 'San Francisco', region: 'CA', iso_country: 'US', capabilities: { sms: false, mms: false, voice: true } },
      { phone_number: '+12125550199', friendly_name: '(212) 555-0199', locality: 'New York', region: 'NY', iso_country: 'US', capabilities: { sms: true, mms: false, voice: true } },
    );
    t = await createTestContext(kind, { config: twilioPeerConfig(peer) });
    client = new Pingram({ apiKey: t.account.apiKey, baseUrl: await t.app.listen({ port: 0, host: '127.0.0.1' }) });
  });
  afterAll(async () => {
    await t?.close();
    await peer?.close();
  });

  it("searchAvailable asks Twilio's AvailablePhoneNumbers with the filters and reads its answer", async () => {
    const found = await client.numbers.searchAvailable('US', 'sms', '415', 5);
    expect(found.numbers).toEqual([{ phoneNumber: SF, locality: 'San Francisco', administrativeArea: 'CA', phoneNumberType: 'local', features: ['sms', 'mms', 'voice'], monthlyPrice: 0 }]);
    const asked = peer.requests.filter((r) => r.resource === 'AvailablePhoneNumbers').at(-1)!;
    expect(asked.authorized).toBe(true);
    expect(asked.path.split('?')[0]).toBe(`/2010-04-01/Accounts/${peer.accountSid}/AvailablePhoneNumbers/US/Local.json`);
    expect(asked.params).toEqual({ PageSize: '5', AreaCode: '415', SmsEnabled: 'true' });
    expect((await client.numbers.searchAvailable('US')).numbers.map((n) => n.phoneNumber)).toEqual([SF, '+14155550143', '+12125550199']);

    const france = await sdkRefusal(client.numbers.searchAvailable('FR'));
    expect([france.status, france.body.error.code, france.body.error.message]).toEqual([400, 'VALIDATION_FAILED', 'Twilio has no phone numbers in FR.']);
  });

  it('releaseNumber gives the number back to Twilio (DELETE IncomingPhoneNumbers/{sid}); ordering it again needs it in Twilio again', async () => {
    peer.ownedNumbers.add(SF);
    await client.numbers.orderNumber({ phoneNumber: SF });
    const registered = (await client.numbers.list()).numbers.find((n) => n.phoneNumber === SF)!;

    const released = await client.numbers.releaseNumber(SF);
    expect(released).toMatchObject({ phoneNumber: SF, released: true });
    const deleted = peer.requests.filter((r) => r.method === 'DELETE');
    expect(deleted.map((r) => [r.path, r.authorized])).toEqual([[`/2010-04-01/Accounts/${peer.accountSid}/IncomingPhoneNumbers/PN${SF.slice(1)}.json`, true]]);
    expect(peer.ownedNumbers.has(SF)).toBe(false);
    expect((await client.numbers.list()).numbers).toEqual([]);
    expect((await client.numbers.listReleased()).numbers.map((n) => [n.phoneNumber, n.billingStatus, n.releasedAt])).toEqual([[SF, 'released', released.releasedAt]]);

    const notInTwilio = await sdkRefusal(client.numbers.orderNumber({ phoneNumber: SF }));
    expect([notInTwilio.status, notInTwilio.body.error.message]).toEqual([400, `${SF} is not a number of the configured Twilio account.`]);
    peer.ownedNumbers.add(SF);
    await client.numbers.orderNumber({ phoneNumber: SF });
    expect((await client.numbers.list()).numbers).toEqual([registered]);
  });

  it('releases a number already gone from the Twilio account without a DELETE', async () => {
    peer.ownedNumbers.add('+12125550199');
    await client.numbers.orderNumber({ phoneNumber: '+12125550199' });
    peer.ownedNumbers.delete('+12125550199');
    const deletesBefore = peer.requests.filter((r) => r.method === 'DELETE').length;
    expect((await client.numbers.releaseNumber('+12125550199')).released).toBe(true);
    expect(peer.requests.filter((r) => r.method === 'DELETE')).toHaveLength(deletesBefore);
  });
});
