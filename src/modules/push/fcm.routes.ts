import { Type } from '@sinclair/typebox';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import type { FcmSettingsService } from './fcm.service.js';

const FcmSettingsSchema = Type.Object(
  {
    fcmConfig: Type.String({ description: 'the service-account JSON as uploaded, without private_key' }),
    projectId: Type.String(),
    clientEmail: Type.String(),
    tokenUri: Type.String(),
    updatedAt: Type.String(),
  },
  { $id: 'FcmSettings' },
);

/**
 * Firebase Cloud Messaging credentials of the environment (the pingram SDK's PushSettingsApi:
 * upsertPushFcmSettings / getPushFcmSettings / deletePushFcmSettings). Registered in app.ts.
 */
export function fcmRoutes(app: App, service: FcmSettingsService): void {
  app.addSchema(FcmSettingsSchema);
  const tags = ['settings'];
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });

  app.get(
    '/settings/push/fcm',
    { schema: { tags, summary: "The environment's FCM service account (private key never returned)", response: withErrors({ 200: Type.Ref('FcmSettings') }) } },
    (req) => service.get(scope(req.auth)),
  );

  app.put(
    '/settings/push/fcm',
    {
      schema: {
        tags,
        summary: 'Set the FCM service account of the environment (private key encrypted at rest)',
        body: Type.Object(
          {
            fcmConfig: Type.Union(
              [Type.String({ minLength: 1, maxLength: 20_000 }), Type.Object({}, { additionalProperties: true })],
              { description: 'the service-account key file: its JSON text (as the SDK sends it) or the object' },
            ),
          },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: Type.Ref('FcmSettings') }),
      },
    },
    (req) => service.put(scope(req.auth), req.body.fcmConfig),
  );

  app.delete(
    '/settings/push/fcm',
    { schema: { tags, summary: 'Remove the FCM service account of the environment', response: withErrors({ 200: MessageSchema }) } },
    async (req) => {
      await service.delete(scope(req.auth));
      return { message: 'FCM settings removed' };
    },
  );
}
