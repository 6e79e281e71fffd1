import { type Static, Type } from '@sinclair/typebox';
import { ChannelSchema, IsoDateTime } from '../../http/schemas.js';
import { DEFAULT_LIMITS } from '../../rendering/liquid.js';

const Str = (max = 10_000) => Type.String({ maxLength: max });
const Obj = Type.Object({}, { additionalProperties: true });

const Attachment = Type.Object({
  filename: Type.String({ minLength: 1, maxLength: 255 }),
  url: Type.Optional(Type.String()),
  content: Type.Optional(Type.String()),
  contentType: Type.Optional(Type.String({ maxLength: 255 })),
});

export const SendOptionsSchema = Type.Object({
  email: Type.Optional(
    Type.Object({
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
    Type.Object({
      expiry: Type.Optional(Type.Number()),
      priority: Type.Optional(Type.Number()),
      collapseId: Type.Optional(Type.String()),
      threadId: Type.Optional(Type.String()),
      badge: Type.Optional(Type.Number()),
      sound: Type.Optional(Type.String()),
      contentAvailable: Type.Optional(Type.Boolean()),
    }),
  ),
  fcm: Type.Optional(
    Type.Object({
      android: Type.Optional(
        Type.Object({
          collapseKey: Type.Optional(Type.String()),
          priority: Type.Optional(Type.Union([Type.Literal('high'), Type.Literal('normal')])),
          ttl: Type.Optional(Type.Number()),
          restrictedPackageName: Type.Optional(Type.String()),
        }),
      ),
    }),
  ),
  push: Type.Optional(Type.Object({ customData: Type.Optional(Type.Record(Type.String(), Type.String(), { maxProperties: 3 })) })),
});

export const SendBodySchema = Type.Object(
  {
    type: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    /** Older clients call the type notificationId. */
    notificationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    to: Type.Optional(Obj),
    /** Older clients call the recipient user. */
    user: Type.Optional(Obj),
    forceChannels: Type.Optional(Type.Array(ChannelSchema, { maxItems: 8 })),
    parameters: Type.Optional(Obj),
    /** Older clients call the parameters mergeTags. */
    mergeTags: Type.Optional(Obj),
    templateId: Type.Optional(Type.String({ maxLength: 200 })),
    subNotificationId: Type.Optional(Type.String({ maxLength: 200 })),
    secondaryId: Type.Optional(Type.String({ maxLength: 200 })),
    // "" means now, as an absent schedule.
    schedule: Type.Optional(Type.Union([Type.Literal(''), IsoDateTime({ description: 'ISO 8601 date-time, at most a year ahead' })])),
    options: Type.Optional(SendOptionsSchema),
    email: Type.Optional(
      Type.Object({
        subject: Type.String({ maxLength: 998 }),
        // Longer html can never render (over the renderer's parse limit): refused at acceptance.
        html: Type.String({ maxLength: DEFAULT_LIMITS.parseLimit }),
        previewText: Type.Optional(Type.String({ maxLength: 1000 })),
        senderName: Type.Optional(Str(200)),
        senderEmail: Type.Optional(Str(254)),
      }),
    ),
    inapp: Type.Optional(Type.Object({ title: Str(5000), url: Type.Optional(Str(2048)), image: Type.Optional(Str(2048)) })),
    sms: Type.Optional(
      Type.Object({
        message: Type.Optional(Str(1600)),
        mediaUrls: Type.Optional(Type.Array(Str(2048), { maxItems: 10 })),
        autoReply: Type.Optional(Type.Object({ message: Str(1600) })),
        from: Type.Optional(Str(32)),
      }),
    ),
    call: Type.Optional(Type.Object({ message: Str(5000) })),
    web_push: Type.Optional(
      Type.Object({ title: Str(500), message: Str(2000), icon: Type.Optional(Str(2048)), url: Type.Optional(Str(2048)) }),
    ),
    mobile_push: Type.Optional(Type.Object({ title: Str(500), message: Str(4000) })),
    slack: Type.Optional(
      Type.Object({
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
  { $id: 'SendBody' },
);

export type SendBody = Static<typeof SendBodySchema>;

export const SendResponseSchema = Type.Object({ trackingId: Type.String(), messages: Type.Array(Type.String()) });
export type SendResponse = Static<typeof SendResponseSchema>;
