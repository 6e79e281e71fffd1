import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { invalid } from '../../errors.js';
import { StringEnum } from '../../http/schemas.js';
import { batchingKeyProblem } from '../inapp/batching-key.js';

/**
 * A notification type's delivery settings (the pingram SDK's GetNotificationsResponseInnerOptions
 * and the in-app client's NotificationConfig): which delivery options a user may pick per channel
 * and which one applies until they pick. The shape is checked by the route schemas below; the
 * rules no schema says (what is supported today, a default that is not allowed) by
 * checkTypeSettings. Values are stored and read back as sent.
 */

export const DELIVERY_OPTIONS = ['off', 'instant', 'hourly', 'daily', 'weekly', 'monthly'] as const;
export type DeliveryOption = (typeof DELIVERY_OPTIONS)[number];
/** The digest options: every channel but in-app (modules/digests, docs/digests.md). */
export const DIGEST_OPTIONS = ['hourly', 'daily', 'weekly', 'monthly'] as const;
export type DigestOption = (typeof DIGEST_OPTIONS)[number];
/** The options of every channel, in-app's only ones. */
export const BASE_DELIVERY_OPTIONS = ['off', 'instant'] as const;

export const isDeliveryOption = (value: string): value is DeliveryOption => (DELIVERY_OPTIONS as readonly string[]).includes(value);
export const isDigestOption = (value: string): value is DigestOption => (DIGEST_OPTIONS as readonly string[]).includes(value);

/** HH:MM on a 24-hour clock: 00:00 to 23:59. */
export const HOUR_PATTERN = '^([01][0-9]|2[0-3]):[0-5][0-9]$';
/** An English weekday name, capitalised (Monday) or lower case (monday). */
export const WEEKDAY_PATTERN = '^([Mm]onday|[Tt]uesday|[Ww]ednesday|[Tt]hursday|[Ff]riday|[Ss]aturday|[Ss]unday)$';

const Hour = Type.String({ pattern: HOUR_PATTERN, description: "HH:MM, 24-hour clock, in the user's time zone" });
const Day = Type.String({ pattern: WEEKDAY_PATTERN, description: 'English weekday name: Monday ... Sunday' });
const strict = <T extends Record<string, TSchema>>(properties: T) => Type.Object(properties, { additionalProperties: false });
const Toggle = strict({ enabled: Type.Boolean() });

/** Every channel but in-app: off, instant and the digest options. */
export const ChannelOptionsSchema = strict({
  defaultDeliveryOption: StringEnum(DELIVERY_OPTIONS),
  off: Type.Optional(Toggle),
  instant: Type.Optional(Toggle),
  hourly: Type.Optional(Toggle),
  daily: Type.Optional(strict({ enabled: Type.Boolean(), hour: Type.Optional(Hour) })),
  weekly: Type.Optional(strict({ enabled: Type.Boolean(), hour: Type.Optional(Hour), day: Type.Optional(Day) })),
  monthly: Type.Optional(strict({ enabled: Type.Boolean(), hour: Type.Optional(Hour), date: Type.Optional(StringEnum(['first', 'last'] as const)) })),
});

/** In-app: off and instant, instant with optional batching. */
export const InappOptionsSchema = strict({
  defaultDeliveryOption: StringEnum(BASE_DELIVERY_OPTIONS),
  off: Type.Optional(Toggle),
  instant: Type.Optional(
    strict({
      enabled: Type.Boolean(),
      batching: Type.Optional(Type.Boolean()),
      batchingKey: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
      batchingWindow: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'milliseconds' })),
    }),
  ),
});

export const TypeOptionsSchema = Type.Partial(
  strict({
    EMAIL: ChannelOptionsSchema,
    INAPP_WEB: InappOptionsSchema,
    SMS: ChannelOptionsSchema,
    CALL: ChannelOptionsSchema,
    PUSH: ChannelOptionsSchema,
    WEB_PUSH: ChannelOptionsSchema,
    SLACK: ChannelOptionsSchema,
  }),
  { additionalProperties: false },
);

export type ChannelOptions = Static<typeof ChannelOptionsSchema>;
export type InappOptions = Static<typeof InappOptionsSchema>;
export type TypeOptions = Static<typeof TypeOptionsSchema>;
export type OptionsChannel = keyof TypeOptions;

export const DeduplicationSchema = strict({ duration: Type.Number({ minimum: 0 }) });
export const ThrottlingSchema = strict({
  max: Type.Number({ minimum: 0 }),
  period: Type.Number({ minimum: 0 }),
  unit: StringEnum(['seconds', 'minutes', 'hours', 'days', 'months', 'years'] as const),
  forever: Type.Boolean(),
  scope: Type.Array(StringEnum(['userId', 'notificationId'] as const), { maxItems: 2, uniqueItems: true }),
});

/** The settings of a create or a patch that checkTypeSettings looks at. */
export interface TypeSettings {
  options?: TypeOptions;
  deduplication?: unknown;
  throttling?: unknown;
  retention?: number | null;
}

/** A channel's options by option name (the defaultDeliveryOption key aside). */
const entriesOf = (options: ChannelOptions | InappOptions | undefined) =>
  (options ?? {}) as unknown as Record<string, { enabled?: boolean; batching?: boolean } | undefined>;


/**
 * Refuses what the schema lets through but the server cannot honour (issue 14: never store a
 * setting and ignore it) and a default the type does not allow:
 * - a default option whose own entry says `enabled: false`;
 * - in-app batching on without a batchingWindow, with a window over 31 days, or with a
 *   batchingKey that is not a path into the notification;
 * - deduplication and throttling values the gates cannot honour (checkDeduplication, checkThrottling).
 * Digest options (hourly, daily, weekly, monthly) are accepted on every channel but in-app (whose
 * schema has none); their `hour`, `day` and `date` are checked by the schema.
 */
export function checkTypeSettings(settings: TypeSettings): void {
  for (const [channel, options] of Object.entries(settings.options ?? {}) as [OptionsChannel, ChannelOptions | InappOptions | undefined][]) {
    if (!options) continue;
    const at = `options.${channel}`;
    const chosen = options.defaultDeliveryOption;
    const entries = entriesOf(options);
    if (entries[chosen]?.enabled === false) {
      throw invalid(`${at}.defaultDeliveryOption is "${chosen}", but ${at}.${chosen}.enabled is false.`, `Enable ${at}.${chosen}, or choose another default.`);
    }
    if (channel === 'INAPP_WEB') checkBatching(at, (options as InappOptions).instant);
  }
  if (settings.deduplication != null) checkDeduplication(settings.deduplication as Static<typeof DeduplicationSchema>);
  if (settings.throttling != null) checkThrottling(settings.throttling as Static<typeof ThrottlingSchema>);
}

/** Longest in-app batching window: 31 days. */
export const MAX_BATCHING_WINDOW_MS = 31 * 24 * 60 * 60 * 1000;

/**
 * In-app batching (modules/inapp/inapp.batching.ts) needs a window to close its batches, and a
 * batchingKey it can read (a path into the notification, e.g. parameters.postId).
 */
function checkBatching(at: string, instant: InappOptions['instant']): void {
  if (instant?.batching && instant.batchingKey !== undefined) {
    const problem = batchingKeyProblem(instant.batchingKey);
    if (problem) throw invalid(`${at}.instant.batchingKey: ${problem}.`, 'Name the value that groups notifications, e.g. "parameters.postId" (no Liquid filters).');
  }
  const window = instant?.batchingWindow;
  if (window !== undefined && window > MAX_BATCHING_WINDOW_MS) {
    throw invalid(`${at}.instant.batchingWindow is ${window} ms; at most ${MAX_BATCHING_WINDOW_MS} (31 days).`, 'Use a shorter window: it is in milliseconds.');
  }
  if (instant?.batching && window === undefined) {
    throw invalid(`${at}.instant.batching is true but ${at}.instant.batchingWindow is missing.`, 'Give batchingWindow: how long (ms) after its first notification a batch takes more, e.g. 3600000 for an hour.');
  }
}

/** The longest deduplication window, in seconds: a year (366 days). */
export const MAX_DEDUPLICATION_SECONDS = 366 * 24 * 3600;
/** The longest throttling window per unit: a hundred years (longer: use forever). */
export const MAX_THROTTLE_PERIOD: Record<Static<typeof ThrottlingSchema>['unit'], number> = {
  seconds: 100 * 366 * 24 * 3600,
  minutes: 100 * 366 * 24 * 60,
  hours: 100 * 366 * 24,
  days: 100 * 366,
  months: 1200,
  years: 100,
};

/** `duration` is whole seconds, 1 to MAX_DEDUPLICATION_SECONDS (send-gates.ts). */
function checkDeduplication({ duration }: Static<typeof DeduplicationSchema>): void {
  if (!Number.isInteger(duration) || duration < 1 || duration > MAX_DEDUPLICATION_SECONDS) {
    throw invalid(
      `deduplication.duration must be a whole number of seconds from 1 to ${MAX_DEDUPLICATION_SECONDS}; got ${duration}.`,
      'Give the window in seconds, e.g. {"duration": 3600} for an hour; set deduplication to null to turn it off.',
    );
  }
}

/** `max` a whole number from 1; `period` a whole number from 1 unless `forever`; `scope` names userId and/or notificationId. */
function checkThrottling({ max, period, unit, forever, scope }: Static<typeof ThrottlingSchema>): void {
  if (!Number.isInteger(max) || max < 1) {
    throw invalid(`throttling.max must be a whole number of sends, at least 1; got ${max}.`, 'To send none of this type, set "enabled": false on the type instead.');
  }
  if (!forever && (!Number.isInteger(period) || period < 1 || period > MAX_THROTTLE_PERIOD[unit])) {
    throw invalid(
      `throttling.period must be a whole number of ${unit} from 1 to ${MAX_THROTTLE_PERIOD[unit]}; got ${period}.`,
      'E.g. {"max": 5, "period": 1, "unit": "hours", "forever": false, "scope": ["userId", "notificationId"]}, or "forever": true to count without a window.',
    );
  }
  if (scope.length === 0) {
    throw invalid('throttling.scope is empty: it must name what is counted.', 'Use ["userId", "notificationId"] (per user and type) or ["notificationId"] (per type, all users together).');
  }
}

/**
 * The delivery options a user may pick on a channel of a type: off and instant unless the type
 * disabled them; a digest option when the type offers it (`<option>.enabled: true`) or makes it
 * the default. In-app has no digests.
 */
export function pickableDeliveries(options: ChannelOptions | InappOptions | undefined, channel?: string): DeliveryOption[] {
  const entries = entriesOf(options);
  const base = BASE_DELIVERY_OPTIONS.filter((option) => entries[option]?.enabled !== false);
  if (channel === 'INAPP_WEB') return base;
  return [...base, ...DIGEST_OPTIONS.filter((option) => entries[option]?.enabled === true || (options?.defaultDeliveryOption === option && entries[option]?.enabled !== false))];
}

/** The option of a channel of a type until the user picks one. */
export function defaultDelivery(options: ChannelOptions | InappOptions | undefined): DeliveryOption {
  return options?.defaultDeliveryOption ?? 'instant';
}
