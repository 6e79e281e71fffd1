import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { NotificationTypeId, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { requireEnv } from '../auth/auth.service.js';
import type { SubNotificationsService } from './sub-notifications.service.js';

const NotificationId = NotificationTypeId;
// As long as a preference's subNotificationId (preferences.routes.ts).
const SubNotificationId = Type.String({ minLength: 1, maxLength: 200 });
const Params = Type.Object({ notificationId: NotificationId, subNotificationId: SubNotificationId });
const ClientParams = Type.Object({ clientId: Type.String(), notificationId: NotificationId, subNotificationId: SubNotificationId });
const Body = Type.Object({ title: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false });
const SubNotificationResponse = Type.Object({ notificationId: Type.String(), subNotificationId: Type.String(), title: Type.String() });
const DeleteResponse = Type.Object({ success: Type.Boolean(), deletedPreferences: Type.Integer() });

/**
 * Sub-notifications (modules/preferences):
 * - the older server SDK: `PUT/DELETE /{clientId}/notifications/{notificationId}/subNotifications/{subNotificationId}`
 *   (Basic clientId:clientSecret; the path's clientId selects the environment, src/http/auth.ts);
 * - API keys: the same without `/{clientId}` (`?envId=` with an account key or a JWT).
 */
export function subNotificationRoutes(app: App, service: SubNotificationsService): void {
  const tags = ['preferences'];
  const scope = (req: FastifyRequest): EnvScope => ({ accountId: req.auth.accountId, envId: requireEnv(req.auth) });
  const put = { tags, summary: 'Create a sub-notification of a type, or rename it', body: Body, response: withErrors({ 200: SubNotificationResponse }) };
  const del = { tags, summary: "Delete a sub-notification and every user's preferences for it", response: withErrors({ 200: DeleteResponse }) };

  for (const [prefix, params] of [['/:clientId', ClientParams], ['', Params]] as const) {
    const path = `${prefix}/notifications/:notificationId/subNotifications/:subNotificationId`;
    app.put(path, { schema: { ...put, params } }, (req) => {
      const { notificationId, subNotificationId } = req.params;
      return service.put(scope(req), notificationId, subNotificationId, req.body.title);
    });
    app.delete(path, { schema: { ...del, params } }, async (req) => {
      const { notificationId, subNotificationId } = req.params;
      return { success: true, deletedPreferences: await service.delete(scope(req), notificationId, subNotificationId) };
    });
  }
}
