import type { Kysely } from 'kysely';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import type { SendingTables } from './sending.tables.js';

/** Which sends a retract names: one user's sends of one type (of one sub-notification when given). */
export interface RetractTarget {
  notificationId: string;
  userId: string;
  subNotificationId?: string;
}

/** Kysely only, scoped by account and environment: the reads of a retract (the ledger writes). */
export class RetractRepository {
  private readonly db: Kysely<CoreTables & SendingTables>;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<SendingTables>();
  }

  /**
   * The target's sends a retract can still change: not processed yet (queued, scheduled), or
   * with a delivery still pending or an in-app notification delivered. Sends that are done
   * elsewhere are left out, so a user's long history is not read on every retract.
   */
  async retractable(scope: EnvScope, target: RetractTarget): Promise<string[]> {
    let query = this.db
      .selectFrom('messages as m')
      .select('m.tracking_id')
      .where('m.account_id', '=', scope.accountId)
      .where('m.env_id', '=', scope.envId)
      .where('m.user_id', '=', target.userId)
      .where('m.notification_id', '=', target.notificationId);
    if (target.subNotificationId !== undefined) query = query.where('m.sub_notification_id', '=', target.subNotificationId);
    const rows = await query
      .where((eb) =>
        eb.or([
          eb('m.state', 'in', ['queued', 'scheduled']),
          eb.exists(
            eb
              .selectFrom('deliveries as d')
              .select('d.id')
              .whereRef('d.tracking_id', '=', 'm.tracking_id')
              .where((d) => d.or([d('d.status', 'in', ['pending', 'digested']), d.and([d('d.channel', '=', 'inapp'), d('d.status', '=', 'delivered')])])),
          ),
        ]),
      )
      .orderBy('m.tracking_id')
      .execute();
    return rows.map((r) => r.tracking_id);
  }
}
