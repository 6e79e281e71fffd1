import { type Kysely, sql } from 'kysely';

/**
 * At most one active default number per account. Two deliveries that both needed the account's
 * first development number (an SMS and a call of one send, run side by side) could each allocate
 * one, leaving two defaults; the index makes the second insert lose, and the loser reads the
 * winner's number. Accounts that already have several keep the oldest as their default.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    update phone_numbers set is_default = 0
    where is_default = 1 and released_at is null and exists (
      select 1 from phone_numbers older
      where older.account_id = phone_numbers.account_id and older.is_default = 1 and older.released_at is null
        and (older.created_at < phone_numbers.created_at or (older.created_at = phone_numbers.created_at and older.phone_number < phone_numbers.phone_number))
    )`.execute(db);
  await sql`create unique index phone_numbers_one_default on phone_numbers (account_id) where is_default = 1 and released_at is null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists phone_numbers_one_default`.execute(db);
}
