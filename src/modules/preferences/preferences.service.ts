import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import { invalid, notFound } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import { SEND_CHANNELS, type SendChannel, logNameOf } from '../sending/channels.js';
import { DELIVERY_OPTIONS, type OptionsChannel, type TypeOptions, defaultDelivery, isDeliveryOption, pickableDeliveries } from '../types/delivery-options.js';
import { TypesRepository } from '../types/types.repository.js';
import { type NotificationType, toNotificationType } from '../types/types.service.js';
import type { WebhookEventType } from '../webhooks/events.js';
import type { NewWebhookEvent, WebhookOutbox } from '../webhooks/outbox.js';
import { PreferencesRepository } from './preferences.repository.js';
import { SubNotificationsRepository } from './sub-notifications.repository.js';
import type { PreferenceDelivery, PreferenceSource, UserPreferencesTable } from './preferences.tables.js';

/** One preference as the clients send it (in-app client postPreferences, server SDK setUserPreferences). */
export interface PreferenceInput {
  notificationId: string;
  subNotificationId?: string;
  /** Omitted: every channel of the type. */
  channel?: SendChannel;
  delivery?: string;
}

/** One preference as GET answers it (GetPreferencesResponse.preferences). */
export interface PreferenceView {
  notificationId: string;
  channel: SendChannel;
  delivery: PreferenceDelivery;
  subNotificationId?: string;
}

/** The in-app client's GetPreferencesResponse. */
export interface PreferencesResponse {
  preferences: PreferenceView[];
  notifications: { notificationId: string; title: string; channels: SendChannel[]; options: TypeOptions }[];
  subNotifications: { notificationId: string; subNotificationId: string; title: string }[];
}

/** What removes preferences: all of a user's, one type's (with its sub-notifications), or one sub-notification's. */
export interface PreferenceFilter {
  notificationId?: string;
  subNotificationId?: string;
}

const UNSUBSCRIBE_EVENT: Record<SendChannel, WebhookEventType> = {
  EMAIL: 'EMAIL_UNSUBSCRIBE',
  INAPP_WEB: 'INAPP_WEB_UNSUBSCRIBE',
  SMS: 'SMS_UNSUBSCRIBE',
  CALL: 'CALL_UNSUBSCRIBE',
  PUSH: 'PUSH_UNSUBSCRIBE',
  WEB_PUSH: 'WEB_PUSH_UNSUBSCRIBE',
  SLACK: 'SLACK_UNSUBSCRIBE',
};
const CHANNEL_OF_LOG = new Map<string, SendChannel>(SEND_CHANNELS.map((c) => [c.log, c.channel]));
const SENDABLE = new Set<string>(SEND_CHANNELS.map((c) => c.channel));

/** Extra context of an unsubscribe event (the one-click unsubscribe passes its send and client). */
export interface UnsubscribeContext {
  trackingId?: string;
  details?: Record<string, unknown>;
}

/**
 * The one owner of user preferences: every write (the in-app client, the server routes, the email
 * one-click unsubscribe) goes through here, and turning a channel off emits that channel's
 * `*_UNSUBSCRIBE` webhook event in the same transaction. Precedence when routing (see
 * PreferenceBook): the sub-notification's option, then the type's, then the type's
 * defaultDeliveryOption, then instant.
 */
export class PreferencesService {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'clock'>,
    private readonly outbox: WebhookOutbox,
  ) {}

  /** The user's preferences with every type of the environment (GetPreferencesResponse). */
  async get(scope: EnvScope, userId: string): Promise<PreferencesResponse> {
    const [rows, types, subNotifications] = await Promise.all([
      new PreferencesRepository(this.deps.db).ofUser(scope.accountId, scope.envId, userId),
      new TypesRepository(this.deps.db).list(scope.accountId, scope.envId),
      new SubNotificationsRepository(this.deps.db).list(scope.accountId, scope.envId),
    ]);
    return {
      preferences: rows.flatMap((row) => {
        const channel = CHANNEL_OF_LOG.get(row.channel);
        if (!channel) return [];
        return [{ notificationId: row.notification_id, channel, delivery: row.delivery, ...(row.sub_notification_id ? { subNotificationId: row.sub_notification_id } : {}) }];
      }),
      notifications: types.map(toNotificationType).map((type) => ({
        notificationId: type.notificationId,
        title: type.title,
        channels: channelsOf(type),
        options: optionsFor(type),
      })),
      // Those registered with their titles (PUT .../subNotifications/{id}).
      subNotifications: subNotifications.map((r) => ({ notificationId: r.notification_id, subNotificationId: r.sub_notification_id, title: r.title })),
    };
  }

  /**
   * Sets preferences, all or none: each names an existing type, a channel a send can use (or none:
   * every channel of the type) and a delivery option the type lets users pick. Channels turned off
   * (that were not off) emit their `*_UNSUBSCRIBE` event in the same transaction.
   */
  async set(scope: EnvScope, userId: string, items: PreferenceInput[], source: Exclude<PreferenceSource, 'unsubscribe'>): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      const types = new TypesRepository(trx);
      const found = new Map<string, NotificationType>();
      const wanted: Omit<Wanted, 'source'>[] = [];
      for (const [index, item] of items.entries()) {
        let type = found.get(item.notificationId);
        if (!type) {
          const row = await types.find(scope.accountId, scope.envId, item.notificationId);
          if (!row) throw notFound('Notification type', item.notificationId, `[${index}].notificationId must be a type of this environment (GET /types).`);
          type = toNotificationType(row);
          found.set(item.notificationId, type);
        }
        const delivery = checkedDelivery(item, index);
        for (const channel of item.channel ? [item.channel] : channelsOf(type)) {
          const options = type.options?.[channel as OptionsChannel];
          const pickable = pickableDeliveries(options, channel);
          if (!pickable.includes(delivery)) {
            const why = channel === 'INAPP_WEB' && delivery !== 'off' && delivery !== 'instant'
              ? 'in-app has no digests'
              : `options.${channel}.${delivery}.enabled is ${delivery === 'off' || delivery === 'instant' ? 'false' : 'not true'}`;
            throw invalid(
              `[${index}].delivery: "${delivery}" is not an option users may pick for ${channel} of type "${type.notificationId}" (${why}).`,
              `Pick one of: ${pickable.join(', ') || 'none'}.`,
            );
          }
          wanted.push({ notificationId: item.notificationId, subNotificationId: item.subNotificationId ?? '', channel, delivery });
        }
      }
      await this.write(trx, scope, userId, wanted.map((w) => ({ ...w, source })), {});
    });
  }

  /**
   * Turns one channel of a type off for a user from an unsubscribe (the email's one-click link):
   * no type check (the type may be gone since the mail left). False when it already was off, so
   * a repeated unsubscribe emits nothing.
   */
  async unsubscribe(scope: EnvScope, userId: string, notificationId: string, channel: SendChannel, context: UnsubscribeContext, trx?: Kysely<CoreTables>): Promise<boolean> {
    const apply = async (db: Kysely<CoreTables>) =>
      (await this.write(db, scope, userId, [{ notificationId, subNotificationId: '', channel, delivery: 'off', source: 'unsubscribe' }], context)) > 0;
    // Within the caller's transaction when it records more with the opt-out (the ledger's log fields of the email).
    return trx ? apply(trx) : this.deps.db.transaction().execute(apply);
  }

  /** Removes preferences (back to the type's defaults); answers how many. Emits nothing: nothing was turned off. */
  reset(scope: EnvScope, userId: string, filter: PreferenceFilter): Promise<number> {
    return new PreferencesRepository(this.deps.db).delete(scope.accountId, scope.envId, userId, filter);
  }

  /** Upserts the rows and emits an unsubscribe event per channel newly off; answers how many events. */
  private async write(trx: Kysely<CoreTables>, scope: EnvScope, userId: string, wanted: Wanted[], context: UnsubscribeContext): Promise<number> {
    const at = this.deps.clock.now().toISOString();
    // The last of duplicates wins, as if they had been sent one after another.
    const rows = new Map<string, UserPreferencesTable>();
    for (const w of wanted) {
      const channel = logNameOf(w.channel);
      rows.set(keyOf(w.notificationId, w.subNotificationId, channel), {
        env_id: scope.envId,
        user_id: userId,
        notification_id: w.notificationId,
        sub_notification_id: w.subNotificationId,
        channel,
        account_id: scope.accountId,
        delivery: w.delivery,
        source: w.source,
        created_at: at,
        updated_at: at,
      });
    }
    // Only what changed comes back: an option set to off again emits nothing.
    const changed = await new PreferencesRepository(trx).upsert([...rows.values()]);
    const events: NewWebhookEvent[] = changed
      .filter((row) => row.delivery === 'off')
      .map((row) => {
        const channel = CHANNEL_OF_LOG.get(row.channel)!;
        return {
          accountId: scope.accountId,
          envId: scope.envId,
          type: UNSUBSCRIBE_EVENT[channel],
          payload: {
            channel,
            userId,
            notificationId: row.notification_id,
            // A preference change belongs to no send; the one-click unsubscribe names the mail's.
            trackingId: context.trackingId ?? '',
            occurredAt: at,
            details: {
              [`${row.channel}_unsubscribed_at`]: at,
              source: row.source,
              ...(row.sub_notification_id ? { subNotificationId: row.sub_notification_id } : {}),
              ...context.details,
            },
          },
        };
      });
    await this.outbox.emit(trx, events);
    return events.length;
  }
}

interface Wanted {
  notificationId: string;
  subNotificationId: string;
  channel: SendChannel;
  delivery: PreferenceDelivery;
  source: PreferenceSource;
}

const keyOf = (notificationId: string, subNotificationId: string, logChannel: string) => `${notificationId}\u0000${subNotificationId}\u0000${logChannel}`;

/** The channels of a type a preference can be about (VOICE has its own call endpoints). */
const channelsOf = (type: NotificationType): SendChannel[] => type.channels.filter((c): c is SendChannel => SENDABLE.has(c));

/** The type's options for each of its channels; a channel without options shows the defaults (instant, off and instant pickable). */
function optionsFor(type: NotificationType): TypeOptions {
  const options: Record<string, unknown> = {};
  for (const channel of channelsOf(type)) {
    options[channel] = type.options?.[channel as OptionsChannel] ?? { defaultDeliveryOption: 'instant', off: { enabled: true }, instant: { enabled: true } };
  }
  return options;
}

/** One of the clients' delivery options; whether the type lets users pick it is checked per channel. */
function checkedDelivery(item: PreferenceInput, index: number): PreferenceDelivery {
  if (item.delivery === undefined) throw invalid(`[${index}].delivery is required.`, `Send one of: ${DELIVERY_OPTIONS.join(', ')}.`);
  if (!isDeliveryOption(item.delivery)) {
    throw invalid(`[${index}].delivery: "${item.delivery}" is not a delivery option.`, `Send one of: ${DELIVERY_OPTIONS.join(', ')}.`);
  }
  return item.delivery;
}

/**
 * The preferences of a batch of sends, read once (PreferenceBook.read) and resolved per message:
 * for each channel, whether the user turned it off (an explicit `off`, never overridden by
 * forceChannels) or the type's default keeps it off until they pick (bypassed by forceChannels,
 * like the rest of the type's channel configuration).
 */
export class PreferenceBook {
  private constructor(private readonly rows: Map<string, PreferenceDelivery>) {}

  /** The options of these users for these types, in one query. */
  static async read(db: Kysely<CoreTables>, scope: EnvScope, userIds: string[], notificationIds: string[]): Promise<PreferenceBook> {
    const rows = await new PreferencesRepository(db).forUsers(scope.accountId, scope.envId, userIds, notificationIds);
    return PreferenceBook.of(rows);
  }

  static of(rows: Pick<UserPreferencesTable, 'user_id' | 'notification_id' | 'sub_notification_id' | 'channel' | 'delivery'>[]): PreferenceBook {
    return new PreferenceBook(new Map(rows.map((r) => [`${r.user_id}\u0000${keyOf(r.notification_id, r.sub_notification_id, r.channel)}`, r.delivery])));
  }

  /**
   * The delivery of one channel for a user's message: the sub-notification's option, else the
   * type's, else the type's default (`explicit` false), else instant.
   */
  resolve(userId: string, type: Pick<NotificationType, 'notificationId' | 'options'>, subNotificationId: string | null | undefined, channel: SendChannel): { delivery: PreferenceDelivery; explicit: boolean } {
    const log = logNameOf(channel);
    const own = (sub: string) => this.rows.get(`${userId}\u0000${keyOf(type.notificationId, sub, log)}`);
    const chosen = (subNotificationId ? own(subNotificationId) : undefined) ?? own('');
    if (chosen) return { delivery: chosen, explicit: true };
    return { delivery: defaultDelivery(type.options?.[channel as OptionsChannel]), explicit: false };
  }

  /** The log channels of a message that are off: by the user's choice, and by the type's default. */
  channelsOff(userId: string, type: Pick<NotificationType, 'notificationId' | 'options'>, subNotificationId: string | null | undefined): { byUser: Set<string>; byDefault: Set<string> } {
    const byUser = new Set<string>();
    const byDefault = new Set<string>();
    for (const { channel, log } of SEND_CHANNELS) {
      const { delivery, explicit } = this.resolve(userId, type, subNotificationId, channel);
      if (delivery === 'off') (explicit ? byUser : byDefault).add(log);
    }
    return { byUser, byDefault };
  }
}
