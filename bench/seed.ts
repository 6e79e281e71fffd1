// Bulk loads of a grown store, not through the API: `size` users and `size` delivered messages
// (one in-app delivery each, as the log view reads them), received over the 30 days before now,
// message i to user i % size. One SQL statement per table, generating the rows in the database
// (SQLite: a recursive CTE in one transaction; PostgreSQL: INSERT ... SELECT generate_series).
import Database from 'better-sqlite3';
import pg from 'pg';

export const SEED_DAYS = 30;
export const seededUser = (i: number) => `seed-user-${i}`;

export interface SeedTarget {
  accountId: string;
  envId: string;
  size: number;
  /** Unix ms of the first message; the last is SEED_DAYS later. */
  startMs: number;
}

const REQUEST = JSON.stringify({ type: 'seed_welcome', to: { id: 'seed-user', email: 'seed@example.com' }, parameters: { name: 'Ada' }, inapp: { title: 'Welcome {{ name }}' } });

/** Milliseconds between two seeded messages. */
const stepMs = (t: SeedTarget) => Math.floor((SEED_DAYS * 86_400_000) / t.size);

export function seedSqlite(file: string, t: SeedTarget): void {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  const step = stepMs(t);
  // n(i) numbers the rows; at(i) the receive time in ISO-8601 as Clarion stores it.
  const series = `with recursive n(i) as (select 0 union all select i + 1 from n where i < ${t.size - 1})`;
  const at = (offsetMs: number) => `strftime('%Y-%m-%dT%H:%M:%fZ', (${t.startMs} + i * ${step} + ${offsetMs}) / 1000.0, 'unixepoch')`;
  const trackingId = `printf('%08x-%04x-7000-8000-%012x', (${t.startMs} + i * ${step}) / 65536, (${t.startMs} + i * ${step}) % 65536, i)`;
  db.transaction(() => {
    db.prepare(
      `${series} insert into users (env_id, id, account_id, email, last_seen_time, created_at, updated_at)
       select ?, 'seed-user-' || i, ?, 'seed-user-' || i || '@example.com', ${at(0)}, ${at(0)}, ${at(0)} from n`,
    ).run(t.envId, t.accountId);
    db.prepare(
      `${series} insert into messages (tracking_id, account_id, env_id, notification_id, user_id, user_email, request, state, ip, agent, received_at, processed_at)
       select ${trackingId}, ?, ?, 'seed_welcome', 'seed-user-' || i, 'seed-user-' || i || '@example.com', ?, 'processed', '127.0.0.1', 'bench-seed', ${at(0)}, ${at(5)} from n`,
    ).run(t.accountId, t.envId, REQUEST);
    db.prepare(
      `${series} insert into deliveries (id, tracking_id, account_id, env_id, channel, routing, status, preview, attempts, sent_at, delivered_at, created_at, updated_at)
       select 'seed-delivery-' || i, ${trackingId}, ?, ?, 'inapp', 'SEND', 'delivered', 'Welcome Ada', 1, ${at(8)}, ${at(9)}, ${at(5)}, ${at(9)} from n`,
    ).run(t.accountId, t.envId);
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

export async function seedPostgres(url: string, t: SeedTarget): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const step = stepMs(t);
    const at = (offsetMs: number) => `to_char(to_timestamp((${t.startMs}::bigint + i::bigint * ${step} + ${offsetMs}) / 1000.0) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
    const ms = `(${t.startMs}::bigint + i::bigint * ${step})`;
    const trackingId = `lpad(to_hex(${ms} / 65536), 8, '0') || '-' || lpad(to_hex(${ms} % 65536), 4, '0') || '-7000-8000-' || lpad(to_hex(i), 12, '0')`;
    const series = `from generate_series(0, ${t.size - 1}) as i`;
    await client.query('begin');
    await client.query(
      `insert into users (env_id, id, account_id, email, last_seen_time, created_at, updated_at)
       select $1, 'seed-user-' || i, $2, 'seed-user-' || i || '@example.com', ${at(0)}, ${at(0)}, ${at(0)} ${series}`,
      [t.envId, t.accountId],
    );
    await client.query(
      `insert into messages (tracking_id, account_id, env_id, notification_id, user_id, user_email, request, state, ip, agent, received_at, processed_at)
       select ${trackingId}, $1, $2, 'seed_welcome', 'seed-user-' || i, 'seed-user-' || i || '@example.com', $3, 'processed', '127.0.0.1', 'bench-seed', ${at(0)}, ${at(5)} ${series}`,
      [t.accountId, t.envId, REQUEST],
    );
    await client.query(
      `insert into deliveries (id, tracking_id, account_id, env_id, channel, routing, status, preview, attempts, sent_at, delivered_at, created_at, updated_at)
       select 'seed-delivery-' || i, ${trackingId}, $1, $2, 'inapp', 'SEND', 'delivered', 'Welcome Ada', 1, ${at(8)}, ${at(9)}, ${at(5)}, ${at(9)} ${series}`,
      [t.accountId, t.envId],
    );
    await client.query('commit');
    await client.query('analyze users, messages, deliveries');
  } finally {
    await client.end();
  }
}
