import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

/** The official SDK's DomainsApi against the started server over real HTTP: its generated models read what Clarion answers. */
describe.each(STORAGE_KINDS)('pingram SDK domains (%s)', (kind) => {
  let t: TestContext;
  let dns: DnsTestServer;
  let client: Pingram;

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(kind, { config: { dnsServer: dns.address } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no TCP address');
    client = new Pingram({ apiKey: t.account.apiKey, baseUrl: `http://127.0.0.1:${address.port}` });
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it('addDomain answers the account domains, listDomains reads them, deleteDomain removes one', async () => {
    const added = await client.domains.addDomain({ sender: 'sdk.example.test' });
    expect(added).toHaveLength(1);
    expect(added[0]).toMatchObject({ sender: 'sdk.example.test', status: 'PENDING', mailFromDomainStatus: 'PENDING', selector: expect.stringMatching(/^clarion/) });
    expect(added[0].lastSync).toBeInstanceOf(Date);
    expect(Number.isNaN(added[0].lastSync.getTime())).toBe(false);
    expect(added[0].privateDKIMKey).toBeUndefined();
    await client.domains.addDomain({ sender: 'ops@second.example.test' });
    expect((await client.domains.listDomains()).map((d) => d.sender)).toEqual(['sdk.example.test', 'second.example.test']);
    expect(await client.domains.deleteDomain('sdk.example.test')).toEqual({ success: true });
    expect((await client.domains.listDomains()).map((d) => d.sender)).toEqual(['second.example.test']);
    await expect(client.domains.deleteDomain('sdk.example.test')).rejects.toMatchObject({ response: { status: 404 } });
  });
});
