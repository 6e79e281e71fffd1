import { Type } from '@sinclair/typebox';
import { NotificationTypeId, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { requireEnv } from '../auth/auth.service.js';
import type { RetractService } from './retract.service.js';

const SubNotificationId = Type.String({ minLength: 1, maxLength: 200 });
const RetractBody = Type.Object(
  {
    notificationId: NotificationTypeId,
    userId: Type.String({ minLength: 1, maxLength: 256 }),
    secondaryId: Type.Optional(SubNotificationId),
    subNotificationId: Type.Optional(SubNotificationId),
  },
  { additionalProperties: false },
);
const RetractResponse = Type.Object({
  trackingIds: Type.Array(Type.String()),
  inappNotifications: Type.Integer(),
  deliveries: Type.Integer(),
  messages: Type.Integer(),
});

/**
 * Retract (the older server SDK's `retract`): `POST /{clientId}/sender/retract`, with the
 * environment's Basic clientId:clientSecret or an API key (the path's clientId selects the
 * environment, src/http/auth.ts). The pingram SDK has no retract, so there is no twin without
 * `/{clientId}`. Answered 200 with what changed, also when nothing matched (a retract repeated
 * changes nothing and is not an error).
 */
export function retractRoutes(app: App, service: RetractService): void {
  app.post(
    '/:clientId/sender/retract',
    {
      schema: {
        tags: ['sending'],
        summary: "Retract a user's sends of a type: remove their in-app notifications and cancel what is not delivered yet",
        params: Type.Object({ clientId: Type.String() }),
        body: RetractBody,
        response: withErrors({ 200: RetractResponse }),
      },
    },
    (req) => service.retract({ accountId: req.auth.accountId, envId: requireEnv(req.auth) }, req.body),
  );
}
