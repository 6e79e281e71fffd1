import { type Kysely, type RawBuilder, type SqlBool, sql } from 'kysely';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import type { UserRow } from '../users/users.repository.js';
import type { UserFilterColumns } from './audience-match.js';
import { type BroadcastsDb, broadcastsDb } from './broadcasts.tables.js';

/** A user as the audience reads it: what the filter sees, and what decides whether it is skipped. */
export interface AudienceUser extends UserFilterColumns {
  suppressions: string | null;
  /** 1 when the user turned the broadcast's type off on email (unsubscribed). */
  unsubscribed: number | boolean;
}

/**
 * Kysely only: reads of an environment's users for audiences, under a filter translated to SQL
 * (audience-sql.ts, which names the table `users`). Pages are in id order (the primary key's
 * order within an environment), so a freeze resumes after the last id it read.
 */
export class AudienceRepository {
  private readonly db: BroadcastsDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = broadcastsDb(db);
  }

  async count(scope: EnvScope, where: RawBuilder<SqlBool>): Promise<number> {
    const row = await this.db
      .selectFrom('users')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('users.env_id', '=', scope.envId)
      .where('users.account_id', '=', scope.accountId)
      .where(where)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Up to `limit` users after `after` (by id) under `where`, with whether each is unsubscribed from `type`. */
  page(scope: EnvScope, where: RawBuilder<SqlBool>, after: string | null, limit: number, type: string | null): Promise<AudienceUser[]> {
    let query = this.db
      .selectFrom('users')
      .select(['users.id', 'users.email', 'users.number', 'users.timezone', 'users.created_at', 'users.properties', 'users.suppressions'])
      .select(this.unsubscribed(type).as('unsubscribed'))
      .where('users.env_id', '=', scope.envId)
      .where('users.account_id', '=', scope.accountId)
      .where(where);
    if (after !== null) query = query.where('users.id', '>', after);
    return query.orderBy('users.id').limit(limit).execute();
  }

  /** Whole user rows (the preview's sample), in id order. */
  sample(scope: EnvScope, where: RawBuilder<SqlBool>, after: string | null, limit: number): Promise<UserRow[]> {
    let query = this.db.selectFrom('users').selectAll('users').where('users.env_id', '=', scope.envId).where('users.account_id', '=', scope.accountId).where(where);
    if (after !== null) query = query.where('users.id', '>', after);
    return query.orderBy('users.id').limit(limit).execute();
  }

  /** The users whose email is one of `emails` (exact), with whether each is unsubscribed from `type`. */
  byEmails(scope: EnvScope, emails: string[], type: string | null): Promise<AudienceUser[]> {
    if (emails.length === 0) return Promise.resolve([]);
    return this.audienceUsers(scope, type).where('users.email', 'in', emails).orderBy('users.id').execute();
  }

  /** The users of `ids` (exact), as byEmails reads them. */
  byIds(scope: EnvScope, ids: string[], type: string | null): Promise<AudienceUser[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.audienceUsers(scope, type).where('users.id', 'in', ids).execute();
  }

  /** The environment's users as an audience reads them: the filterable fields and the unsubscription from `type`. */
  private audienceUsers(scope: EnvScope, type: string | null) {
    return this.db
      .selectFrom('users')
      .select(['users.id', 'users.email', 'users.number', 'users.timezone', 'users.created_at', 'users.properties', 'users.suppressions'])
      .select(this.unsubscribed(type).as('unsubscribed'))
      .where('users.env_id', '=', scope.envId)
      .where('users.account_id', '=', scope.accountId);
  }

  /** The user turned `type` off on email (the one-click unsubscribe writes this row). */
  private unsubscribed(type: string | null): RawBuilder<number> {
    if (type === null) return sql<number>`0`;
    return sql<number>`case when exists (
      select 1 from user_preferences p
      where p.env_id = users.env_id and p.user_id = users.id and p.notification_id = ${type}
        and p.sub_notification_id = '' and p.channel = 'email' and p.delivery = 'off'
    ) then 1 else 0 end`;
  }
}
