import type { Kysely, Selectable, Updateable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';

/** Conventions of storage/schema.ts: ISO-8601 text timestamps, JSON as text, booleans as 0/1. */
export interface InappNotificationsTable {
  account_id: string;
  env_id: string;
  user_id: string;
  tracking_id: string;
  notification_id: string;
  sub_notification_id: string | null;
  title: string;
  redirect_url: string | null;
  image_url: string | null;
  delivery_options: string | null;
  template: string | null;
  parameters: string | null;
  date: string;
  seen: number;
  opened: string | null;
  clicked: string | null;
  archived: string | null;
  actioned1: string | null;
  actioned2: string | null;
  replies: string;
  exp_date: string | null;
  created_at: string;
  updated_at: string;
}

export type InappTables = {
  inapp_notifications: InappNotificationsTable;
};

export type InappRow = Selectable<InappNotificationsTable>;
export type InappRowPatch = Updateable<InappNotificationsTable>;

/** Whose notifications: every query is scoped by all three. */
export interface InappScope {
  accountId: string;
  envId: string;
  userId: string;
}

/** A Kysely instance or an open transaction (callers may pass their own transaction). */
export type AnyKysely = Kysely<CoreTables>;

/** A notification's identity: (env, user, trackingId), its unique key. */
export const inappKey = (row: Pick<InappRow, 'env_id' | 'user_id' | 'tracking_id'>) => `${row.env_id}\u0000${row.user_id}\u0000${row.tracking_id}`;

/** 23 columns a row: 11,500 parameters a statement, under SQLite's 32,766 and PostgreSQL's 65,535. */
const ROWS_PER_INSERT = 500;

export class InappRepository {
  private readonly db: Kysely<CoreTables & InappTables>;
  constructor(db: AnyKysely) {
    this.db = db.withTables<InappTables>();
  }

  private scoped(scope: InappScope) {
    return this.db
      .selectFrom('inapp_notifications')
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('user_id', '=', scope.userId);
  }

  /**
   * Inserts the rows whose (env, user, trackingId) is not stored yet, a statement for up to
   * ROWS_PER_INSERT rows; answers the keys (inappKey) of the rows this call inserted.
   */
  async insertManyIfAbsent(rows: InappRow[]): Promise<Set<string>> {
    const inserted = new Set<string>();
    for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
      const written = await this.db
        .insertInto('inapp_notifications')
        .values(rows.slice(i, i + ROWS_PER_INSERT))
        .onConflict((oc) => oc.columns(['env_id', 'user_id', 'tracking_id']).doNothing())
        .returning(['env_id', 'user_id', 'tracking_id'])
        .execute();
      for (const row of written) inserted.add(inappKey(row));
    }
    return inserted;
  }

  find(scope: InappScope, trackingId: string): Promise<InappRow | undefined> {
    return this.scoped(scope).selectAll().where('tracking_id', '=', trackingId).executeTakeFirst();
  }

  findMany(scope: InappScope, trackingIds: string[]): Promise<InappRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.scoped(scope).selectAll().where('tracking_id', 'in', trackingIds).execute();
  }

  /**
   * Newest first; `before` is exclusive; expired rows are left out. Clients page with `before` set
   * to the date of the last notification they got (the SDKs' protocol has no other cursor), and
   * several notifications can share a date (one worker batch stores its rows at one instant): a
   * page that ended inside such a group would lose the rest of it to the next page's exclusive
   * `before`. So a full page is extended with the rest of its last date's group, a few rows over
   * `count` at most, and the next page starts strictly older.
   */
  async list(scope: InappScope, options: { before?: string; count: number; now: string }): Promise<InappRow[]> {
    const visible = () => this.scoped(scope).selectAll().where((eb) => eb.or([eb('exp_date', 'is', null), eb('exp_date', '>', options.now)]));
    let query = visible();
    if (options.before !== undefined) query = query.where('date', '<', options.before);
    const page = await query.orderBy('date', 'desc').orderBy('tracking_id', 'desc').limit(options.count).execute();
    const last = page.at(-1);
    if (page.length < options.count || !last) return page;
    const rest = await visible().where('date', '=', last.date).where('tracking_id', '<', last.tracking_id).orderBy('tracking_id', 'desc').execute();
    return rest.length === 0 ? page : [...page, ...rest];
  }

  async countUnseen(scope: InappScope, now: string): Promise<number> {
    const row = await this.scoped(scope)
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('seen', '=', 0)
      .where('archived', 'is', null)
      .where((eb) => eb.or([eb('exp_date', 'is', null), eb('exp_date', '>', now)]))
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  async update(scope: InappScope, trackingIds: string[], patch: InappRowPatch): Promise<number> {
    if (trackingIds.length === 0) return 0;
    const result = await this.db
      .updateTable('inapp_notifications')
      .set(patch)
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('user_id', '=', scope.userId)
      .where('tracking_id', 'in', trackingIds)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** Replies are a JSON list per row; rows are locked on PostgreSQL so concurrent replies all land. */
  async repliesForUpdate(scope: InappScope, trackingIds: string[], lock: boolean): Promise<Pick<InappRow, 'tracking_id' | 'replies'>[]> {
    if (trackingIds.length === 0) return [];
    let query = this.scoped(scope).select(['tracking_id', 'replies']).where('tracking_id', 'in', trackingIds);
    if (lock) query = query.forUpdate();
    return query.execute();
  }

  async setReplies(scope: InappScope, trackingId: string, replies: string, updatedAt: string): Promise<void> {
    await this.update(scope, [trackingId], { replies, updated_at: updatedAt });
  }

  async markSeen(scope: InappScope, filter: { trackingIds?: string[]; notificationId?: string }, updatedAt: string): Promise<number> {
    let query = this.db
      .updateTable('inapp_notifications')
      .set({ seen: 1, updated_at: updatedAt })
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('user_id', '=', scope.userId)
      .where('seen', '=', 0);
    if (filter.trackingIds) {
      if (filter.trackingIds.length === 0) return 0;
      query = query.where('tracking_id', 'in', filter.trackingIds);
    }
    if (filter.notificationId !== undefined) query = query.where('notification_id', '=', filter.notificationId);
    const result = await query.executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /**
   * Deletes the user's notifications of a type (of one sub-notification when given): a retract.
   * Answers the tracking ids removed, for the user's sockets.
   */
  async deleteOfType(scope: InappScope, notificationId: string, subNotificationId?: string): Promise<string[]> {
    let query = this.db
      .deleteFrom('inapp_notifications')
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('user_id', '=', scope.userId)
      .where('notification_id', '=', notificationId);
    if (subNotificationId !== undefined) query = query.where('sub_notification_id', '=', subNotificationId);
    const rows = await query.returning('tracking_id').execute();
    return rows.map((r) => r.tracking_id);
  }

  /** Deletes up to `limit` notifications of one type of one environment stored before `before` (its retention); answers how many. */
  async purgeTypeBefore(envId: string, notificationId: string, before: string, limit = 5000): Promise<number> {
    const old = this.db
      .selectFrom('inapp_notifications')
      .select(['env_id', 'user_id', 'tracking_id'])
      .where('env_id', '=', envId)
      .where('notification_id', '=', notificationId)
      .where('created_at', '<', before)
      .limit(limit)
      .$asTuple('env_id', 'user_id', 'tracking_id');
    const result = await this.db
      .deleteFrom('inapp_notifications')
      .where((eb) => eb(eb.refTuple('env_id', 'user_id', 'tracking_id'), 'in', old))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
