import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { CHANNELS, type Channel } from '../../http/schemas.js';
import { LIST_LIMIT_MAX } from './users.service.js';

/**
 * HTTP shapes of the users routes (OpenAPI). The HTTP layer checks the coarse shape; the
 * service re-checks every rule with a precise message, as it also serves the send pipeline.
 */

const StringEnum = <T extends string>(values: readonly T[], description?: string) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });

const Device = Type.Object({
  device_id: Type.String({ minLength: 1 }),
  app_id: Type.Optional(Type.String()),
  ad_id: Type.Optional(Type.String()),
  platform: Type.Optional(Type.String()),
  manufacturer: Type.Optional(Type.String()),
  model: Type.Optional(Type.String()),
});

const PushToken = Type.Object({
  type: StringEnum(['FCM', 'APN'] as const),
  token: Type.String({ minLength: 1 }),
  device: Device,
  environment: Type.Optional(Type.String({ description: '`production`, or `sandbox`/`undefined` (default) for APNs development builds' })),
});

const WebPushToken = Type.Object({
  sub: Type.Object({
    endpoint: Type.String({ description: 'https URL of the push service' }),
    keys: Type.Object({
      p256dh: Type.String({ description: 'base64url, 65-byte uncompressed P-256 point' }),
      auth: Type.String({ description: 'base64url, 16 bytes' }),
    }),
  }),
});

// Open objects: the OAuth response and property values are stored as given (values checked by the service).
const SlackToken = Type.Object(
  { ok: Type.Optional(Type.Boolean()), access_token: Type.Optional(Type.String()) },
  { additionalProperties: true, description: 'chat-workspace OAuth v2 access response' },
);
const PropertiesSchema = Type.Object(
  {},
  {
    additionalProperties: true,
    description:
      'key -> string | number | boolean; shallow-merged into the stored properties, null deletes a key. At most 25 keys, keys up to 64 characters, strings up to 256, 1 KB serialized.',
  },
);

/**
 * OpenAPI `nullable` rather than a union with null: under Ajv's type coercion a union would
 * unwrap one-element arrays; with `nullable`, null and the declared type pass untouched.
 */
const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });

export const IdentifyBody = Type.Object(
  {
    id: Type.Optional(Type.String({ description: 'must equal the path userId when present' })),
    email: Type.Optional(Nullable(Type.String({ description: 'null or "" clears it' }))),
    number: Type.Optional(Nullable(Type.String({ description: 'E.164, or a US/Canada number; stored as E.164; null or "" clears it' }))),
    pushTokens: Type.Optional(Nullable(Type.Array(PushToken))),
    webPushTokens: Type.Optional(Nullable(Type.Array(WebPushToken))),
    timezone: Type.Optional(Nullable(Type.String({ description: 'IANA time zone name; null or "" clears it' }))),
    slackChannel: Type.Optional(Nullable(Type.String({ description: 'null or "" clears it' }))),
    slackToken: Type.Optional(Nullable(SlackToken)),
    properties: Type.Optional(PropertiesSchema),
  },
  { description: 'Fields present replace the stored ones, absent fields are preserved, null clears.' },
);
export type IdentifyBodyType = Static<typeof IdentifyBody>;

/**
 * A send's recipient (`to`, older clients' `user`): the identify fields, stored on the user as a
 * send goes. Open, as the published clients send whole user objects (read-only fields included).
 */
export const RecipientSchema = Type.Object(
  {
    ...IdentifyBody.properties,
    id: Type.Optional(Type.String({ description: 'the user; without it, email or number identifies (and names) them' })),
  },
  { additionalProperties: true, description: 'The recipient: id, email or number identifies them; other fields update the stored user.' },
);

export const UserSchema = Type.Object(
  {
    id: Type.String(),
    email: Type.Optional(Type.String()),
    number: Type.Optional(Type.String()),
    pushTokens: Type.Optional(Type.Array(PushToken)),
    webPushTokens: Type.Optional(Type.Array(WebPushToken)),
    timezone: Type.Optional(Type.String()),
    slackChannel: Type.Optional(Type.String()),
    slackToken: Type.Optional(SlackToken),
    properties: Type.Optional(PropertiesSchema),
    lastSeenTime: Type.String(),
    updatedAt: Type.String(),
    createdAt: Type.String(),
    emailSuppressionStatus: Type.Optional(
      Type.Object({ reason: Type.String({ description: '`Bounce` or `Complaint`' }), details: Type.Object({}, { additionalProperties: true }) }),
    ),
  },
  { $id: 'User' },
);

export const UserIdParams = Type.Object({ userId: Type.String({ minLength: 1, maxLength: 256 }) });

export const EnvQuery = Type.Object({
  envId: Type.Optional(Type.String({ description: 'environment (clientId); required with a JWT' })),
});

export const ListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIST_LIMIT_MAX, description: 'page size, default 50' })),
  nextToken: Type.Optional(Type.String({ description: 'lastEvaluatedKey of the previous page; empty for the first page' })),
  envId: Type.Optional(Type.String()),
});

export const SuppressionParams = Type.Object({
  userId: Type.String({ minLength: 1, maxLength: 256 }),
  channel: StringEnum<Channel>(CHANNELS),
});
