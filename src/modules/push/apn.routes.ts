import { Type } from '@sinclair/typebox';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import type { ApnSettingsService } from './apn-settings.service.js';

const Id = (what: string) => Type.String({ minLength: 1, maxLength: 64, pattern: '^\\s*[A-Za-z0-9]+\\s*$', description: what });

const apnConfigProperties = {
  KeyId: Id('key id of the APNs auth key (10 characters)'),
  Key: Type.String({ minLength: 1, maxLength: 10_000, description: 'the .p8 key (PEM); masked when read' }),
  TeamId: Id('Apple developer team id'),
  Topic: Type.String({ minLength: 1, maxLength: 255, description: "the app's bundle id (apns-topic)" }),
};
const ApnConfigSchema = Type.Object(apnConfigProperties, { $id: 'APNConfig' });

/** PUT/GET/DELETE /settings/push/apn: the environment's APNs token-based credentials (pingram PushSettingsApi). */
export function apnRoutes(app: App, service: ApnSettingsService): void {
  app.addSchema(ApnConfigSchema);
  const tags = ['settings'];
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });

  app.get(
    '/settings/push/apn',
    { schema: { tags, summary: "The environment's APNs configuration (key masked)", response: withErrors({ 200: Type.Ref('APNConfig') }) } },
    (req) => service.get(scope(req.auth)),
  );

  app.put(
    '/settings/push/apn',
    {
      schema: {
        tags,
        summary: "Store the environment's APNs credentials (the .p8 key is encrypted at rest)",
        body: Type.Object(apnConfigProperties),
        response: withErrors({ 200: Type.Ref('APNConfig') }),
      },
    },
    (req) => service.put(scope(req.auth), req.body),
  );

  app.delete(
    '/settings/push/apn',
    { schema: { tags, summary: "Remove the environment's APNs credentials", response: withErrors({ 200: MessageSchema }) } },
    async (req) => {
      await service.delete(scope(req.auth));
      return { message: 'APN configuration removed' };
    },
  );
}
