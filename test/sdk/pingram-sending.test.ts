import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { eventually } from '../helpers/wait.js';

describe('pingram SDK: send, schedule, logs, types, templates and components', () => {
  let t: TestContext;
  let smtp: SmtpPeer;
  let client: Pingram;

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    t = await createTestContext('sqlite', { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    client = new Pingram({ apiKey: t.account.apiKey, baseUrl: address });
  });
  afterAll(async () => {
    await t.close();
    await smtp.close();
  });

  it('sends, and reads the logs by id and by query', async () => {
    const sent = await client.send({
      type: 'sdk_welcome',
      to: { id: 'sdk-user', email: 'sdk@example.com' },
      parameters: { name: 'SDK' },
      email: { subject: 'Hello {{ name }}', html: '<b>{{ name }}</b>' },
    });
    expect(sent.trackingId).toMatch(/^[0-9a-f-]{36}$/);
    const [mail] = await smtp.waitFor(1);
    expect(mail.parsed.subject).toBe('Hello SDK');

    const byId = await eventually(async () => {
      const r = await client.logs.getLogsByTrackingIds(sent.trackingId);
      return (r.logs[0] as unknown as Record<string, unknown> | undefined)?.email_sent_at ? r : undefined;
    });
    expect(byId.logs[0].trackingId).toBe(sent.trackingId);

    const { queryId } = await client.logs.startLogsQuery({ notificationFilter: ['sdk_welcome'] });
    const result = await eventually(async () => {
      const r = await client.logs.getLogsQueryResult(queryId);
      return r.status === 'Complete' ? r : undefined;
    });
    expect(result.logs?.map((l) => l.trackingId)).toEqual([sent.trackingId]);
  });

  it('updates and deletes a schedule', async () => {
    const sent = await client.send({ type: 'sdk_later', to: { id: 'sdk-user' }, inapp: { title: 'later' }, schedule: new Date(Date.now() + 86_400_000).toISOString() });
    const later = new Date(Date.now() + 2 * 86_400_000).toISOString();
    const updated = await client.sender.updateSchedule(sent.trackingId, { type: 'sdk_later', to: { id: 'sdk-user' }, inapp: { title: 'later still' }, schedule: later });
    expect(updated.message).toBeTruthy();
    const log = (await client.logs.getLogsByTrackingIds(sent.trackingId)).logs[0] as unknown as Record<string, unknown>;
    expect(log.schedule_updated_to).toBe(later);
    const deleted = await client.sender.deleteSchedule(sent.trackingId);
    expect(deleted.message).toBeTruthy();
    const after = (await client.logs.getLogsByTrackingIds(sent.trackingId)).logs[0] as unknown as Record<string, unknown>;
    expect(after.schedule_deleted_at).toBeDefined();
  });
});
