import type { Deps } from '../../deps.js';
import { notFound } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { TypesRepository } from '../types/types.repository.js';
import { PreferencesRepository } from './preferences.repository.js';
import { SubNotificationsRepository } from './sub-notifications.repository.js';

/** A sub-notification as the routes answer it and GetPreferencesResponse lists it. */
export interface SubNotification {
  notificationId: string;
  subNotificationId: string;
  title: string;
}

/**
 * Sub-notifications: the named subdivisions of a type (a project, a thread) that users can set
 * preferences for (the older server SDK's createSubNotification / deleteSubNotification). A send
 * names one with `subNotificationId`; routing then follows that sub-notification's options first
 * (PreferenceBook). Registering one is what lists it, with its title, in the user's preferences;
 * sends and preferences do not require it.
 */
export class SubNotificationsService {
  constructor(private readonly deps: Pick<Deps, 'db' | 'clock' | 'storage'>) {}

  /**
   * Creates it, or renames it. The type must exist (404): a sub-notification belongs to one type.
   * The type's row is locked against deletion (PostgreSQL) from the read on, as the foreign key
   * would lock it at the insert: a DELETE /types in flight is waited for and answered as the 404,
   * one that comes later waits and takes the sub-notification with the type.
   */
  async put(scope: EnvScope, notificationId: string, subNotificationId: string, title: string): Promise<SubNotification> {
    const at = this.deps.clock.now().toISOString();
    await this.deps.db.transaction().execute(async (trx) => {
      const types = new TypesRepository(trx, this.deps.storage.dialect === 'postgres');
      const type = await types.findLockedAgainstDelete(scope.accountId, scope.envId, notificationId);
      if (!type) throw notFound('Notification type', notificationId, 'Create the type first (POST /types), or send it once: sending creates it.');
      await new SubNotificationsRepository(trx).upsert({
        env_id: scope.envId,
        notification_id: notificationId,
        sub_notification_id: subNotificationId,
        account_id: scope.accountId,
        title,
        created_at: at,
        updated_at: at,
      });
    });
    return { notificationId, subNotificationId, title };
  }

  /**
   * Deletes it together with every user's options for it (in one transaction): its preferences
   * would otherwise go on deciding sends that name it, invisible in GET .../preferences. Answers
   * how many options went; 404 when it does not exist.
   */
  delete(scope: EnvScope, notificationId: string, subNotificationId: string): Promise<number> {
    return this.deps.db.transaction().execute(async (trx) => {
      const existed = await new SubNotificationsRepository(trx).delete(scope.accountId, scope.envId, notificationId, subNotificationId);
      if (!existed) throw notFound('Sub-notification', `${notificationId}/${subNotificationId}`, 'Create it with PUT .../notifications/{notificationId}/subNotifications/{subNotificationId}.');
      return new PreferencesRepository(trx).deleteOfSubNotification(scope.accountId, scope.envId, notificationId, subNotificationId);
    });
  }
}
