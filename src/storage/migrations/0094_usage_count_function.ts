import { type Kysely, SqliteAdapter, sql } from 'kysely';

/**
 * `clarion_count_usage(account, cycle, count, cap)` (PostgreSQL only): counts `count` messages in
 * the account's cycle when they all fit under `cap` (creating the cycle's counter on its first
 * message) and answers the new count; when they do not fit it counts nothing and raises SQLSTATE
 * UC001 ("usage cap"), which aborts the transaction. A statement that fails instead of answering
 * "no row" can be sent without waiting for its answer (PgClient's deferred statements): the send
 * intake counts its batch in the same round trip as COMMIT (issue 11), and a refused count fails
 * the commit, so nothing of the batch is kept. SQLite counts in-process (UsageRepository.tryCount).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  await sql`
    create or replace function clarion_count_usage(p_account text, p_cycle text, p_count integer, p_cap integer) returns integer
    language plpgsql as $fn$
    declare
      counted integer;
    begin
      update usage_counters set messages = messages + p_count
        where account_id = p_account and cycle_start = p_cycle and messages <= p_cap - p_count
        returning messages into counted;
      if counted is null then
        insert into usage_counters (account_id, cycle_start, messages) values (p_account, p_cycle, 0)
          on conflict (account_id, cycle_start) do nothing;
        update usage_counters set messages = messages + p_count
          where account_id = p_account and cycle_start = p_cycle and messages <= p_cap - p_count
          returning messages into counted;
      end if;
      if counted is null then
        raise exception 'usage cap: % messages do not fit under % in cycle % of account %', p_count, p_cap, p_cycle, p_account
          using errcode = 'UC001';
      end if;
      return counted;
    end
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  await sql`drop function if exists clarion_count_usage(text, text, integer, integer)`.execute(db);
}
