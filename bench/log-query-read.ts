/**
 * CPU time of reading a finished 5,000-log query (GET /logs/query/{queryId}), SQLite, in process.
 * Run: npx tsx bench/log-query-read.ts
 */
import { createTestContext } from '../test/helpers/context.js';
import { eventually } from '../test/helpers/wait.js';
import type { SendingTables } from '../src/modules/sending/sending.tables.js';

const LOGS = 5000;
const READS = 20;

const t = await createTestContext('sqlite', { workers: true });
try {
  const db = t.deps.db.withTables<SendingTables>();
  const base = Date.parse('2026-01-01T00:00:00.000Z');
  const request = JSON.stringify({ type: 'welcome', to: { id: 'u', email: 'u@example.com' }, email: { subject: 'Hello there', html: '<p>' + 'x'.repeat(300) + '</p>' } });
  const rows = Array.from({ length: LOGS }, (_, i) => {
    const id = `0190${String(i).padStart(8, '0')}-0000-7000-8000-000000000000`;
    const at = new Date(base + i * 1000).toISOString();
    return {
      message: { tracking_id: id, account_id: t.account.accountId, env_id: t.account.clientId, notification_id: 'welcome', user_id: `u${i}`, user_email: `u${i}@example.com`, user_number: null, template_id: null, sub_notification_id: null, request, state: 'processed' as const, job_id: null, ip: '127.0.0.1', agent: 'bench', received_at: at, processed_at: at, scheduled_for: null, schedule_updated_at: null, schedule_updated_to: null, schedule_deleted_at: null, failed_at: null, failed_code: null, failed_internal: null, skipped: null },
      delivery: { id: `d${i}`, tracking_id: id, account_id: t.account.accountId, env_id: t.account.clientId, channel: 'email', routing: 'SEND' as const, routing_reason: null, status: 'delivered' as const, content: null, preview: 'Hello there', attempts: 1, sent_at: at, delivered_at: at, failed_at: null, failed_code: null, failed_internal: null, provider_message_id: null, extra: null, created_at: at, updated_at: at },
    };
  });
  for (let i = 0; i < rows.length; i += 200) {
    await db.insertInto('messages').values(rows.slice(i, i + 200).map((r) => r.message)).execute();
    await db.insertInto('deliveries').values(rows.slice(i, i + 200).map((r) => r.delivery)).execute();
  }
  const { queryId } = (await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: {} })).json();
  await eventually(async () => (await t.app.inject({ method: 'GET', url: `/logs/query/${queryId}`, headers: t.auth })).json().status === 'Complete', 60_000);
  await t.workers?.stop();

  // One full read: every page, following nextToken when the server paginates.
  const readAll = async () => {
    let token: string | undefined;
    let count = 0;
    let pages = 0;
    do {
      const res = await t.app.inject({ method: 'GET', url: `/logs/query/${queryId}${token ? `?nextToken=${token}` : ''}`, headers: t.auth });
      const body = res.json();
      count += body.logs.length;
      pages++;
      token = body.nextToken;
    } while (token);
    return { count, pages };
  };
  await readAll();
  const first = await t.app.inject({ method: 'GET', url: `/logs/query/${queryId}`, headers: t.auth });
  const c0 = process.cpuUsage();
  for (let i = 0; i < READS; i++) await t.app.inject({ method: 'GET', url: `/logs/query/${queryId}`, headers: t.auth });
  const c1 = process.cpuUsage(c0);
  const c2 = process.cpuUsage();
  let shape = { count: 0, pages: 0 };
  for (let i = 0; i < READS; i++) shape = await readAll();
  const c3 = process.cpuUsage(c2);
  const ms = (c: NodeJS.CpuUsage) => ((c.user + c.system) / 1000 / READS).toFixed(1);
  console.log(`first page: ${first.json().logs.length} logs, ${first.body.length} bytes, ${ms(c1)} ms CPU per GET`);
  console.log(`whole result: ${shape.count} logs in ${shape.pages} page(s), ${ms(c3)} ms CPU per full read`);
} finally {
  await t.close();
}
