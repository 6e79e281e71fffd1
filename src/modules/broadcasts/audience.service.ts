import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import { UsersRepository } from '../users/users.repository.js';
import { planRecipientUpsert, toUser } from '../users/users.service.js';
import type { Suppressions, User } from '../users/users.types.js';
import { parseFilter } from './audience-filter.js';
import { type UserFilterColumns, filterMatcher } from './audience-match.js';
import { type TranslatedFilter, translateFilter } from './audience-sql.js';
import { type AudienceUser, AudienceRepository } from './audience.repository.js';
import { type Audience, audienceOf } from './broadcast-input.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import type { BroadcastRecipientsTable, BroadcastRow, SkipReason } from './broadcasts.tables.js';
import { RecipientsRepository } from './recipients.repository.js';

/** Users read per page, by a filter's freeze and by scans that mingo decides. */
export const USER_PAGE = 1000;
/** Listed addresses frozen per page (each page reads and creates their users). */
export const EMAIL_PAGE = 500;
const SAMPLE_SIZE = 10;

/** A user of a preview's sample; an address with no user yet shows as the user freezing it will create. */
export type SampleUser = User | { id: string; email: string };

/** What one freeze step did: wrote a page with more to come, wrote the last one, or lost to another run of the freeze. */
export type FreezeStep = 'more' | 'done' | 'raced';

/**
 * Resolves audiences: their size and a sample (the preview), and the freeze that writes a
 * sending broadcast's audience into recipient rows, page by page, so that 100k users are never
 * in memory at once. A filter runs as SQL (audience-sql.ts); what SQL does not evaluate ($regex)
 * is decided by mingo over the users the SQL part selects, a page at a time.
 */
export class AudienceService {
  constructor(private readonly deps: Pick<Deps, 'db' | 'storage' | 'clock' | 'secrets'>) {}

  async preview(scope: EnvScope, audience: Audience): Promise<{ size: number; sample: SampleUser[] }> {
    if ('emails' in audience) {
      const first = audience.emails.slice(0, SAMPLE_SIZE);
      const users = await new AudienceRepository(this.deps.db).byEmails(scope, first, null);
      const full = await new UsersRepository(this.deps.db).findMany(scope.accountId, scope.envId, users.map((u) => u.id));
      const byEmail = new Map(full.filter((u) => u.email !== null).map((u) => [u.email!, u]));
      return { size: audience.emails.length, sample: first.map((email) => (byEmail.has(email) ? toUser(byEmail.get(email)!, this.deps.secrets) : { id: email, email })) };
    }
    const filter = this.translate(audience.filter);
    const repo = new AudienceRepository(this.deps.db);
    if (filter.exact) {
      const [size, rows] = await Promise.all([repo.count(scope, filter.where), repo.sample(scope, filter.where, null, SAMPLE_SIZE)]);
      return { size, sample: rows.map((row) => toUser(row, this.deps.secrets)) };
    }
    const matches = filterMatcher(audience.filter);
    let size = 0;
    const sample: SampleUser[] = [];
    for (let after: string | null = null; ; ) {
      const rows = await repo.sample(scope, filter.where, after, USER_PAGE);
      for (const row of rows) {
        if (!matches(row)) continue;
        size++;
        if (sample.length < SAMPLE_SIZE) sample.push(toUser(row, this.deps.secrets));
      }
      if (rows.length < USER_PAGE) return { size, sample };
      after = rows[rows.length - 1].id;
    }
  }

  /** How many users the audience holds now (before skips). */
  async size(scope: EnvScope, audience: Audience): Promise<number> {
    if ('emails' in audience) return audience.emails.length;
    const filter = this.translate(audience.filter);
    if (filter.exact) return new AudienceRepository(this.deps.db).count(scope, filter.where);
    return (await this.preview(scope, audience)).size;
  }

  /**
   * Writes the next page of the broadcast's audience into recipients (pending, or skipped with
   * why), and marks the audience frozen after the last. The page and the freeze cursor's move
   * commit together, guarded by the cursor read: a second run of the freeze (an at-least-once
   * job run twice) loses ('raced') instead of writing a page twice.
   */
  async freezeStep(scope: EnvScope, row: BroadcastRow): Promise<FreezeStep> {
    const audience = audienceOf(row);
    return 'emails' in audience ? this.freezeEmails(scope, row, audience.emails) : this.freezeFilter(scope, row, audience.filter);
  }

  private async freezeFilter(scope: EnvScope, row: BroadcastRow, filter: Record<string, unknown>): Promise<FreezeStep> {
    const translated = this.translate(filter);
    const users = await new AudienceRepository(this.deps.db).page(scope, translated.where, row.freeze_cursor, USER_PAGE, row.notification_id);
    const matches = translated.exact ? () => true : filterMatcher(filter);
    const last = users.length < USER_PAGE;
    return this.deps.db.transaction().execute(async (trx) => {
      const now = this.deps.clock.now().toISOString();
      const broadcasts = new BroadcastsRepository(trx);
      if (users.length > 0) {
        const chosen = users.filter((u) => matches(u));
        const moved = await broadcasts.advanceFreeze(scope, row.id, row.freeze_cursor, users[users.length - 1].id, row.frozen_count + chosen.length, now);
        if (!moved) return 'raced';
        await new RecipientsRepository(trx).insertMany(chosen.map((u, i) => recipientRow(row, row.frozen_count + i + 1, u, u.email, now)));
      }
      if (!last) return 'more';
      return (await broadcasts.finishFreeze(scope, row.id, now)) ? 'done' : 'raced';
    });
  }

  /**
   * A page of listed addresses: each becomes the user that has it as email, or a new user whose
   * id is the address (as POST /send does for a recipient given by email only).
   */
  private async freezeEmails(scope: EnvScope, row: BroadcastRow, emails: string[]): Promise<FreezeStep> {
    const start = row.freeze_cursor === null ? 0 : Number(row.freeze_cursor);
    const page = emails.slice(start, start + EMAIL_PAGE);
    const end = start + page.length;
    return this.deps.db.transaction().execute(async (trx) => {
      const now = this.deps.clock.now().toISOString();
      const broadcasts = new BroadcastsRepository(trx);
      if (page.length > 0) {
        // First a write (on SQLite it takes the write lock): nothing read below goes stale.
        if (!(await broadcasts.advanceFreeze(scope, row.id, row.freeze_cursor, String(end), row.frozen_count + page.length, now))) return 'raced';
        const users = await this.usersOfAddresses(trx, scope, page, row.notification_id, now);
        await new RecipientsRepository(trx).insertMany(page.map((email, i) => recipientRow(row, row.frozen_count + i + 1, users.get(email)!, email, now)));
      }
      if (end < emails.length) return 'more';
      return (await broadcasts.finishFreeze(scope, row.id, now)) ? 'done' : 'raced';
    });
  }

  private async usersOfAddresses(trx: Kysely<CoreTables>, scope: EnvScope, emails: string[], type: string | null, now: string): Promise<Map<string, AudienceUser>> {
    const audience = new AudienceRepository(trx);
    const found = new Map<string, AudienceUser>();
    // The lowest id among users sharing an address (byEmails reads in id order).
    for (const user of await audience.byEmails(scope, emails, type)) if (!found.has(user.email!)) found.set(user.email!, user);
    const missing = emails.filter((e) => !found.has(e));
    if (missing.length > 0) {
      const rows = missing.map((email) => planRecipientUpsert(undefined, scope.accountId, scope.envId, email, { email }, now, this.deps.secrets).row);
      await new UsersRepository(trx).insertManyIfAbsent(rows);
      // Created now, or there already (a user whose id is the address has another email).
      for (const user of await audience.byIds(scope, missing, type)) found.set(user.id, user);
    }
    return found;
  }

  private translate(filter: Record<string, unknown>): TranslatedFilter {
    return translateFilter(parseFilter(filter), this.deps.storage.dialect);
  }
}

/** Why a user of the audience is not sent to, or null. */
function skipReasonOf(user: Pick<AudienceUser, 'suppressions' | 'unsubscribed'>, email: string | null): SkipReason | null {
  if (!email) return 'NO_EMAIL';
  const suppression = user.suppressions ? (JSON.parse(user.suppressions) as Suppressions).EMAIL : undefined;
  if (suppression) return suppression.reason === 'Bounce' ? 'BOUNCED' : 'SUPPRESSED';
  if (Number(user.unsubscribed) === 1 || user.unsubscribed === true) return 'UNSUBSCRIBED';
  return null;
}

function recipientRow(broadcast: BroadcastRow, seq: number, user: UserFilterColumns & Pick<AudienceUser, 'suppressions' | 'unsubscribed'>, email: string | null, now: string): BroadcastRecipientsTable {
  const skip = skipReasonOf(user, email);
  return {
    broadcast_id: broadcast.id,
    seq,
    account_id: broadcast.account_id,
    env_id: broadcast.env_id,
    user_id: user.id,
    email,
    state: skip ? 'skipped' : 'pending',
    skip_reason: skip,
    tracking_id: null,
    sent_at: null,
    delivered_at: null,
    failed_at: null,
    bounced_at: null,
    opened_at: null,
    clicked_at: null,
    unsubscribed_at: null,
    due_at: null,
    updated_at: now,
  };
}
