import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthService, requireEnv } from '../auth/auth.service.js';
import { type InappAuthenticator, inappUnauthorized, parseInappBasic } from '../inapp/inapp.auth.js';
import type { WebPushService } from './web-push.service.js';

const PublicSettingsSchema = Type.Object({
  publicKey: Type.String({ description: 'VAPID public key (base64url, uncompressed P-256): the applicationServerKey of PushManager.subscribe()' }),
  subject: Type.String({ description: 'VAPID subject (mailto: or https:) sent to push services' }),
});

const AccountMetadataSchema = Type.Object({
  userAccountMetadata: Type.Object({
    logo: Type.String(),
    environmentVapidPublicKey: Type.String(),
    hasWebPushEnabled: Type.Boolean(),
  }),
});

/**
 * The environment's VAPID public key, for browsers to subscribe with:
 * - `GET /settings/push/web` with the account's credentials;
 * - the in-app clients' account metadata, with end-user credentials (Basic clientId:userId[:userHash]):
 *   `GET /users/account-metadata` (pingram UserApi.getAccountMetadata; an API key works too) and
 *   `GET /{clientId}/users/{userId}/account_metadata` (@notificationapi/core getUserAccountMetadata).
 * Keys are generated on first read (or first send).
 */
export function webPushRoutes(app: App, services: { webPush: WebPushService; inappAuth: InappAuthenticator; auth: AuthService }): void {
  const { webPush: service, inappAuth: authenticator, auth: accountAuth } = services;
  const tags = ['web push'];

  app.get(
    '/settings/push/web',
    { schema: { tags, summary: "The environment's VAPID public key and subject (the key pair is created on first use)", response: withErrors({ 200: PublicSettingsSchema }) } },
    (req) => service.publicSettings(req.auth.accountId, requireEnv(req.auth)),
  );

  /** End-user credentials (or an API key / JWT) name the environment; the key is public, the environment is not guessed. */
  async function userScope(req: FastifyRequest, userIdInPath?: string): Promise<{ accountId: string; envId: string }> {
    const header = req.headers.authorization;
    if (userIdInPath === undefined && header && /^bearer\s/i.test(header)) {
      const envId = (req.query as Record<string, unknown> | undefined)?.envId;
      // The metadata is what a web page shows anyway (logo, VAPID public key): a public key may read it.
      const auth = await accountAuth.authenticate(header, typeof envId === 'string' ? envId : undefined, { publicKey: true });
      return { accountId: auth.accountId, envId: requireEnv(auth) };
    }
    const credentials = parseInappBasic(header, userIdInPath);
    if (!credentials) throw inappUnauthorized('Missing in-app credentials.');
    if (userIdInPath !== undefined && credentials.clientId !== (req.params as { clientId: string }).clientId) {
      throw inappUnauthorized('The credentials are for another clientId than the one in the path.');
    }
    const scope = await authenticator.authenticate(credentials);
    return { accountId: scope.accountId, envId: scope.envId };
  }

  const metadataSchema = { tags, summary: "Account metadata for in-app clients: the environment's VAPID public key", response: withErrors({ 200: AccountMetadataSchema }) };
  app.get('/users/account-metadata', { config: { auth: 'inapp' }, schema: metadataSchema }, async (req) => {
    const { accountId, envId } = await userScope(req);
    return service.accountMetadata(accountId, envId);
  });
  app.get(
    '/:clientId/users/:userId/account_metadata',
    { config: { auth: 'inapp' }, schema: { ...metadataSchema, params: Type.Object({ clientId: Type.String(), userId: Type.String() }) } },
    async (req) => {
      const { accountId, envId } = await userScope(req, req.params.userId);
      return service.accountMetadata(accountId, envId);
    },
  );
}
