import { type ObjectOptions, type Static, type TProperties, Type } from '@sinclair/typebox';
import { ChannelSchema, IsoDateTime, NotificationTypeId } from '../../http/schemas.js';
import { DEFAULT_LIMITS } from '../../rendering/liquid.js';
import { RecipientSchema as UserRecipientSchema } from '../users/users.schemas.js';

const Str = (max = 10_000) => Type.String({ maxLength: max });
const Obj = Type.Object({}, { additionalProperties: true });
/**
 * Every object of the send body is closed: a misspelt field or channel key is a 400 that names it
 * (src/http/error-handler.ts), never accepted and ignored. Checked by the compiled schema (ajv),
 * so it adds no pass over the body.
 */
const Strict = <T extends TProperties>(properties: T, options: ObjectOptions = {}) => Type.Object(properties, { additionalProperties: false, ...options });

const Attachment = Strict({
  filename: Type.String({ minLength: 1, maxLength: 255 }),
  url: Type.Optional(Type.String()),
  content: Type.Optional(Type.String()),
  contentType: Type.Optional(Type.String({ maxLength: 255 })),
});

export const SendOptionsSchema = Strict({
  email: Type.Optional(
    Strict({
      replyToAddresses: Type.Optional(Type.Array(Str(254), { maxItems: 50 })),
      ccAddresses: Type.Optional(Type.Array(Str(254), { maxItems: 50 })),
      bccAddresses: Type.Optional(Type.Array(Str(254), { maxItems: 50 })),
      fromAddress: Type.Optional(Str(254)),
      fromName: Type.Optional(Str(200)),
      attachments: Type.Optional(Type.Array(Attachment, { maxItems: 20 })),
      condition: Type.Optional(Type.String()),
    }),
  ),
  apn: Type.Optional(
    Strict({
      expiry: Type.Optional(Type.Number({ minimum: 0, description: 'seconds until expiry; 0: now or never' })),
      // APNs' apns-priority values: 10 immediate, 5 power-saving, 1 prioritize the device's power.
      priority: Type.Optional(Type.Union([Type.Literal(10), Type.Literal(5), Type.Literal(1)])),
      // apns-collapse-id: APNs refuses more than 64 bytes (400 BadCollapseId), after the send was accepted.
      collapseId: Type.Optional(Type.String({ maxLength: 64 })),
      threadId: Type.Optional(Type.String()),
      badge: Type.Optional(Type.Integer({ minimum: 0, description: 'the app icon badge; 0 clears it' })),
      sound: Type.Optional(Type.String()),
      contentAvailable: Type.Optional(Type.Boolean()),
    }),
  ),
  fcm: Type.Optional(
    Strict({
      android: Type.Optional(
        Strict({
          collapseKey: Type.Optional(Type.String()),
          priority: Type.Optional(Type.Union([Type.Literal('high'), Type.Literal('normal')])),
          ttl: Type.Optional(Type.Number({ minimum: 0, maximum: 2_419_200, description: 'seconds (FCM keeps a message at most 28 days)' })),
          restrictedPackageName: Type.Optional(Type.String()),
        }),
      ),
    }),
  ),
  push: Type.Optional(Strict({ customData: Type.Optional(Type.Record(Type.String(), Type.String(), { maxProperties: 3 })) })),
});

/**
 * The recipient: the writable fields of a user, typed as POST /users/{userId} types them (the
 * OpenAPI document shows them), and the read-only ones of the user record a client may pass back
 * (lastSeenTime, createdAt, updatedAt, emailSuppressionStatus), accepted and not written, as the
 * server keeps those itself. Anything else is a 400 that names it.
 */
const Any = Type.Unknown();
const RecipientSchema = Strict(
  {
    ...UserRecipientSchema.properties,
    lastSeenTime: Type.Optional(Any),
    createdAt: Type.Optional(Any),
    updatedAt: Type.Optional(Any),
    emailSuppressionStatus: Type.Optional(Any),
  },
  { description: 'the recipient user: identified by id, else email, else number; upserted as POST /users/{userId} does' },
);

/** Top-level fields named `x-...` are accepted and not interpreted: a client may carry its own data (or a newer field) without a 400. */
export const SEND_EXTENSION_PREFIX = 'x-';

export const SendBodySchema = Strict(
  {
    type: Type.Optional(NotificationTypeId),
    /** Older clients call the type notificationId. */
    notificationId: Type.Optional(NotificationTypeId),
    to: Type.Optional(RecipientSchema),
    /** Older clients call the recipient user. */
    user: Type.Optional(RecipientSchema),
    forceChannels: Type.Optional(Type.Array(ChannelSchema, { maxItems: 8 })),
    parameters: Type.Optional(Obj),
    /** Older clients call the parameters mergeTags, and older still replace (deprecated in the pingram SDK). */
    mergeTags: Type.Optional(Obj),
    replace: Type.Optional(Obj),
    templateId: Type.Optional(Type.String({ maxLength: 200 })),
    subNotificationId: Type.Optional(Type.String({ maxLength: 200 })),
    secondaryId: Type.Optional(Type.String({ maxLength: 200 })),
    // "" means now, as an absent schedule.
    schedule: Type.Optional(Type.Union([Type.Literal(''), IsoDateTime({ description: 'ISO 8601 date-time, at most a year ahead' })])),
    options: Type.Optional(SendOptionsSchema),
    email: Type.Optional(
      Strict({
        subject: Type.String({ maxLength: 998 }),
        // Longer html can never render (over the renderer's parse limit): refused at acceptance.
        html: Type.String({ maxLength: DEFAULT_LIMITS.parseLimit }),
        previewText: Type.Optional(Type.String({ maxLength: 1000 })),
        senderName: Type.Optional(Str(200)),
        senderEmail: Type.Optional(Str(254)),
      }),
    ),
    inapp: Type.Optional(Strict({ title: Str(5000), url: Type.Optional(Str(2048)), image: Type.Optional(Str(2048)) })),
    sms: Type.Optional(
      Strict({
        message: Type.Optional(Str(1600)),
        mediaUrls: Type.Optional(Type.Array(Str(2048), { maxItems: 10 })),
        autoReply: Type.Optional(Strict({ message: Str(1600) })),
        from: Type.Optional(Str(32)),
      }),
    ),
    call: Type.Optional(Strict({ message: Str(5000) })),
    web_push: Type.Optional(
      Strict({ title: Str(500), message: Str(2000), icon: Type.Optional(Str(2048)), url: Type.Optional(Str(2048)) }),
    ),
    mobile_push: Type.Optional(Strict({ title: Str(500), message: Str(4000) })),
    slack: Type.Optional(
      Strict({
        text: Str(40_000),
        blocks: Type.Optional(Type.Array(Obj, { maxItems: 50 })),
        username: Type.Optional(Str(80)),
        icon: Type.Optional(Str(2048)),
        thread_ts: Type.Optional(Str(64)),
        reply_broadcast: Type.Optional(Type.Boolean()),
        parse: Type.Optional(Type.Union([Type.Literal('full'), Type.Literal('none')])),
        link_names: Type.Optional(Type.Boolean()),
        mrkdwn: Type.Optional(Type.Boolean()),
        unfurl_links: Type.Optional(Type.Boolean()),
        unfurl_media: Type.Optional(Type.Boolean()),
        metadata: Type.Optional(Obj),
      }),
    ),
  },
  {
    $id: 'SendBody',
    // Named, so that a client may add its own fields without a 400 (see SEND_EXTENSION_PREFIX).
    patternProperties: { '^x-': {} },
    description: 'Unknown fields are refused (400 naming them), except top-level fields named x-... which are kept in the request and not interpreted.',
  },
);

export type SendBody = Static<typeof SendBodySchema>;

export const SendResponseSchema = Type.Object({ trackingId: Type.String(), messages: Type.Array(Type.String()) });
export type SendResponse = Static<typeof SendResponseSchema>;

/** The merge-tag values of a send: `parameters`, or its older names `mergeTags` and `replace`. */
export function parametersOf(body: Pick<SendBody, 'parameters' | 'mergeTags' | 'replace'>): Record<string, unknown> {
  return body.parameters ?? body.mergeTags ?? body.replace ?? {};
}
