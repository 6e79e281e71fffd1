// The intake journal's chunk format (the messages repository writes it on SQLite, the ingest job and log reads parse it)
// and the recipient read that decides whether a send writes its user.
import { describe, expect, it } from 'vitest';
import { journalChunk, journalEntry, parseMessages } from '../../src/modules/sending/messages.journal.js';
import type { MessageRow } from '../../src/modules/sending/sending.tables.js';
import type { UserRow } from '../../src/modules/users/users.repository.js';
import { randomBytes } from 'node:crypto';
import { Secrets } from '../../src/secrets.js';
import { planRecipientUpsert, recipientColumns } from '../../src/modules/users/users.service.js';
import { queuedMessageRow } from '../helpers/rows.js';

const secrets = new Secrets(randomBytes(32));

function message(overrides: Partial<MessageRow> = {}): MessageRow {
  return queuedMessageRow({
    tracking_id: '0190d6f0-0000-7000-8000-000000000001',
    account_id: 'acc-1',
    env_id: 'env-1',
    notification_id: 'order "shipped" \\ \u2028',
    user_id: 'u-\u00e9\ud83d\ude00',
    template_id: 'tpl-1',
    request: JSON.stringify({ type: 'order', to: { id: 'u' }, parameters: { quote: '"', nested: [1, 2.5, null, { a: true }] } }),
    ip: '127.0.0.1',
    received_at: '2026-11-23T08:00:00.000Z',
    ...overrides,
  });
}

describe('intake journal chunks', () => {
  it('give back every column of the journaled message rows, the request byte for byte', () => {
    const a = message();
    const b = message({ tracking_id: '0190d6f0-0000-7000-8000-000000000002', template_id: null, agent: 'curl/8', sub_notification_id: 'sub' });
    const chunk = journalChunk([journalEntry(a, 'a@example.com', null), journalEntry(b, null, '+14155550123')]);
    expect(parseMessages(chunk)).toEqual([
      { ...a, user_email: 'a@example.com' },
      { ...b, user_number: '+14155550123' },
    ]);
  });

  it('write an entry as JSON.stringify writes its columns, the request embedded as it is', () => {
    const row = message({ agent: 'agent "x"\n\u0001', sub_notification_id: 'lone \ud800' });
    const columns = [row.tracking_id, row.account_id, row.env_id, row.notification_id, row.user_id, 'a@example.com', null, row.template_id, row.sub_notification_id, row.ip, row.agent, row.received_at];
    expect(journalEntry(row, 'a@example.com', null)).toBe(`${JSON.stringify(columns).slice(0, -1)},${row.request}]`);
  });

  it('still parse chunks written as message objects without their null columns (the earlier format)', () => {
    const row = message({ user_email: 'x@example.com' });
    const older = JSON.stringify([Object.fromEntries(Object.entries(row).filter(([, v]) => v !== null))]);
    expect(parseMessages(older)).toEqual([row]);
  });
});

describe('recipient read', () => {
  const stored: UserRow = {
    env_id: 'env-1',
    id: 'u-1',
    account_id: 'acc-1',
    email: 'old@example.com',
    number: null,
    push_tokens: null,
    web_push_tokens: null,
    timezone: 'Europe/Paris',
    slack_channel: null,
    slack_token: null,
    properties: JSON.stringify({ plan: 'pro', seats: 3 }),
    suppressions: null,
    last_seen_time: '2026-01-01T00:00:00.000Z',
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
  };
  const only = (columns: string) => Object.fromEntries(columns.split(', ').map((c) => [c, stored[c as keyof UserRow]])) as unknown as UserRow;
  const now = '2026-11-23T08:00:00.000Z';

  it('reads the columns the patch sets, plus email and number', () => {
    expect(recipientColumns({})).toBe('email, number');
    expect(recipientColumns({ email: 'a@example.com' })).toBe('email, number');
    expect(recipientColumns({ properties: { a: 1 }, timezone: 'UTC' })).toBe('email, number, timezone, properties');
  });

  it('decides "no write" from those columns alone when nothing changes', () => {
    const patch = { email: 'old@example.com', properties: { plan: 'pro' } };
    const plan = planRecipientUpsert(only(recipientColumns(patch)), 'acc-1', 'env-1', 'u-1', patch, now, secrets);
    expect(plan.write).toBeNull();
    expect(plan.row.email).toBe('old@example.com');
  });

  it('plans an update that keeps every column the patch does not set', () => {
    const patch = { email: 'new@example.com', properties: { seats: 4, plan: null } };
    expect(planRecipientUpsert(only(recipientColumns(patch)), 'acc-1', 'env-1', 'u-1', patch, now, secrets).write).toBe('update');
    const plan = planRecipientUpsert(stored, 'acc-1', 'env-1', 'u-1', patch, now, secrets);
    expect(plan).toEqual({
      write: 'update',
      row: { ...stored, email: 'new@example.com', properties: JSON.stringify({ seats: 4 }), updated_at: now },
    });
  });
});
