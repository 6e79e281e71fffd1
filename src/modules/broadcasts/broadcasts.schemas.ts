import { Type } from '@sinclair/typebox';
import { IsoDateTime, NotificationTypeId, StringEnum } from '../../http/schemas.js';
import { DEFAULT_LIMITS } from '../../rendering/liquid.js';
import { UserSchema } from '../users/users.schemas.js';
import { COLUMN_FIELDS, FILTER_LIMITS } from './audience-filter.js';
import { MAX_AUDIENCE_EMAILS } from './broadcast-input.js';
import { BROADCAST_STATUSES, PAUSED_REASONS } from './broadcast-states.js';
import { RECIPIENT_STATES, SKIP_REASONS } from './broadcasts.tables.js';
import { MAX_TEST_ADDRESSES } from './test-send.js';

const Address = (description?: string) => Type.String({ minLength: 1, maxLength: 320, ...(description ? { description } : {}) });
const TypeId = Type.String({ ...NotificationTypeId, description: 'notification type id; created when missing' });

export const AudienceInput = Type.Object(
  {
    filter: Type.Optional(
      Type.Unknown({
        description: `MongoDB-style query over users: fields ${COLUMN_FIELDS.join(', ')}, properties.<key>; operators $and $or $nor $not $exists $eq $ne $gt $gte $lt $lte $in $nin $regex; at most ${FILTER_LIMITS.conditions} conditions, ${FILTER_LIMITS.depth} levels, ${FILTER_LIMITS.bytes} bytes (docs/broadcasts.md)`,
      }),
    ),
    emails: Type.Optional(Type.Array(Type.String({ maxLength: 320 }), { description: `at most ${MAX_AUDIENCE_EMAILS} addresses; duplicates are dropped; unknown addresses become users when the broadcast starts` })),
  },
  { additionalProperties: false, description: 'exactly one of filter and emails' },
);

const AudienceOutput = Type.Object({ filter: Type.Optional(Type.Unknown()), emails: Type.Optional(Type.Array(Type.String())) });

/** The spec's Broadcast record. */
export const BroadcastSchema = Type.Object({
  broadcastId: Type.String({ description: 'UUIDv7' }),
  name: Type.String(),
  status: StringEnum(BROADCAST_STATUSES),
  pausedReason: Type.Optional(StringEnum(PAUSED_REASONS, 'present while paused')),
  type: Type.Optional(Type.String()),
  channel: StringEnum(['email'] as const),
  audience: AudienceOutput,
  fromName: Type.String(),
  fromAddress: Type.String(),
  replyToAddress: Type.Optional(Type.String()),
  subject: Type.String(),
  html: Type.String(),
  internalTemplate: Type.Optional(Type.String({ description: 'single-record reads only' })),
  scheduleAt: Type.Optional(Type.String()),
  archivedAt: Type.Optional(Type.String()),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

const contentFields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  channel: Type.Optional(StringEnum(['email'] as const, 'the only channel of broadcasts')),
  audience: AudienceInput,
  fromName: Type.String({ maxLength: 200 }),
  fromAddress: Address('the platform default sender (at most 10 recipients) or an address on a verified domain; checked at schedule and send'),
  subject: Type.String({ maxLength: 998, description: 'may be empty in a draft; required to schedule or send' }),
  html: Type.String({ maxLength: DEFAULT_LIMITS.parseLimit }),
};

export const CreateBody = Type.Object(
  {
    ...contentFields,
    type: Type.Optional(TypeId),
    replyToAddress: Type.Optional(Address()),
    internalTemplate: Type.Optional(Type.String({ maxLength: DEFAULT_LIMITS.parseLimit, description: 'visual-editor source; only at creation, with html' })),
  },
  { additionalProperties: false },
);

export const UpdateBody = Type.Object(
  {
    ...Type.Partial(Type.Object(contentFields)).properties,
    type: Type.Optional(Type.Union([TypeId, Type.Null()])),
    replyToAddress: Type.Optional(Type.Union([Address(), Type.Null()])),
    internalTemplate: Type.Optional(Type.Unknown({ description: 'refused: settable only at creation' })),
  },
  { additionalProperties: false },
);

export const BroadcastParams = Type.Object({ broadcastId: Type.String({ minLength: 1, maxLength: 64 }) });

export const ListQuery = Type.Object({
  cursor: Type.Optional(Type.String({ maxLength: 64, description: 'nextCursor of the previous page' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  archived: Type.Optional(Type.Boolean({ description: 'true: archived broadcasts are listed too' })),
});

export const ScheduleBody = Type.Object({ sendAt: IsoDateTime({ description: 'a future ISO 8601 date-time, at most a year ahead' }) }, { additionalProperties: false });

export const TestBody = Type.Object(
  { emails: Type.Array(Type.String({ maxLength: 320 }), { minItems: 1, maxItems: MAX_TEST_ADDRESSES, description: `1 to ${MAX_TEST_ADDRESSES} addresses` }) },
  { additionalProperties: false },
);

export const PreviewBody = Type.Object({ audience: AudienceInput }, { additionalProperties: false });
export const PreviewResponse = Type.Object({
  size: Type.Integer({ description: 'users in the audience now (suppressed and unsubscribed ones included: they are skipped when it is frozen)' }),
  sample: Type.Array(Type.Union([UserSchema, Type.Object({ id: Type.String(), email: Type.String() })]), { description: 'up to 10 users, in id order (emails: the first 10 addresses)' }),
});

const counts = Object.fromEntries(RECIPIENT_STATES.map((s) => [s, Type.Integer()]));
export const MetricsSchema = Type.Object({
  broadcastId: Type.String(),
  status: Type.String(),
  total: Type.Integer(),
  counts: Type.Object(counts, { description: 'pending and skipped: recipients in that state; the others: recipients that reached that step' }),
  skipped: Type.Object(Object.fromEntries(SKIP_REASONS.map((r) => [r, Type.Optional(Type.Integer())]))),
  rates: Type.Object({ delivery: Type.Number(), open: Type.Number(), click: Type.Number(), bounce: Type.Number(), failure: Type.Number(), unsubscribe: Type.Number() }),
});

const optional = (names: string[]) => Object.fromEntries(names.map((n) => [n, Type.Optional(Type.String())]));
export const RecipientSchema = Type.Object({
  userId: Type.String(),
  state: StringEnum(RECIPIENT_STATES),
  skipReason: Type.Optional(StringEnum(SKIP_REASONS)),
  ...optional(['email', 'trackingId', 'sentAt', 'deliveredAt', 'failedAt', 'bouncedAt', 'openedAt', 'clickedAt', 'unsubscribedAt']),
  updatedAt: Type.String(),
});

export const RecipientsQuery = Type.Object({
  state: Type.Optional(StringEnum(RECIPIENT_STATES)),
  cursor: Type.Optional(Type.String({ maxLength: 32, description: 'nextCursor of the previous page' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
});

export const TransitionSchema = Type.Object({
  operation: Type.String(),
  from: Type.String(),
  to: Type.String(),
  pausedReason: Type.Optional(Type.String()),
  actor: Type.String({ description: 'system, or apiKey:<keyId>, basic:<clientId>, jwt:<subject>' }),
  at: Type.String(),
});
