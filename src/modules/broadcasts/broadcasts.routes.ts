import { Type } from '@sinclair/typebox';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import { parseAudience } from './broadcast-input.js';
import type { Broadcasts } from './broadcasts.module.js';
import {
  BroadcastParams,
  BroadcastSchema,
  CreateBody,
  ListQuery,
  MetricsSchema,
  PreviewBody,
  PreviewResponse,
  RecipientSchema,
  RecipientsQuery,
  ScheduleBody,
  TestBody,
  TransitionSchema,
  UpdateBody,
} from './broadcasts.schemas.js';
import { callerOf } from './broadcasts.service.js';

/** Email broadcasts (docs/broadcasts.md). Every success answers 200. */
export function broadcastRoutes(app: App, broadcasts: Broadcasts): void {
  const tags = ['broadcasts'];
  const { service } = broadcasts;
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });
  const caller = (auth: AuthContext) => callerOf(auth, requireEnv(auth));
  const conflict = { 409: Type.Ref('ErrorBody') };
  const one = withErrors({ 200: BroadcastSchema, ...conflict });

  app.post('/broadcasts', { schema: { tags, summary: 'Create a draft broadcast (its type is created when missing)', body: CreateBody, response: one } }, (req) =>
    service.create(caller(req.auth), req.body),
  );
  app.get(
    '/broadcasts',
    {
      schema: {
        tags,
        summary: 'Broadcasts of this environment, newest first; archived ones only with ?archived=true',
        querystring: ListQuery,
        response: withErrors({ 200: Type.Object({ broadcasts: Type.Array(BroadcastSchema, { description: 'without internalTemplate' }), nextCursor: Type.Optional(Type.String()) }) }),
      },
    },
    (req) => service.list(scope(req.auth), req.query),
  );
  app.post(
    '/broadcasts/audience/preview',
    { schema: { tags, summary: "An audience's size now and a sample of its users", body: PreviewBody, response: withErrors({ 200: PreviewResponse }) } },
    (req) => broadcasts.audience.preview(scope(req.auth), parseAudience(req.body.audience)),
  );
  app.get('/broadcasts/:broadcastId', { schema: { tags, summary: 'One broadcast, with its internalTemplate', params: BroadcastParams, response: withErrors({ 200: BroadcastSchema }) } }, (req) =>
    service.get(scope(req.auth), req.params.broadcastId),
  );
  app.patch(
    '/broadcasts/:broadcastId',
    { schema: { tags, summary: 'Change a draft (drafts only; internalTemplate cannot change)', params: BroadcastParams, body: UpdateBody, response: one } },
    (req) => service.update(caller(req.auth), req.params.broadcastId, req.body),
  );
  app.delete(
    '/broadcasts/:broadcastId',
    { schema: { tags, summary: 'Delete a draft (drafts only)', params: BroadcastParams, response: withErrors({ 200: Type.Object({ success: Type.Boolean() }), ...conflict }) } },
    async (req) => {
      await service.delete(caller(req.auth), req.params.broadcastId);
      return { success: true };
    },
  );
  app.post(
    '/broadcasts/:broadcastId/schedule',
    { schema: { tags, summary: 'Schedule a draft for sendAt (subject, type and a verified fromAddress required)', params: BroadcastParams, body: ScheduleBody, response: one } },
    (req) => service.schedule(caller(req.auth), req.params.broadcastId, req.body.sendAt),
  );

  const operations = [
    ['send', 'Send a draft now (subject, type and a verified fromAddress required): status sending, its audience is frozen into recipients'],
    ['pause', 'Pause a sending broadcast (pausedReason PAUSED_BY_USER)'],
    ['resume', 'Resume a paused broadcast'],
    ['cancel', 'Cancel: scheduled -> draft; sending or paused -> canceled, pending recipients skipped'],
    ['archive', 'Archive (draft, paused, sent, canceled): hidden from the default list'],
    ['unarchive', 'Restore an archived broadcast to the default list'],
  ] as const;
  for (const [operation, summary] of operations) {
    app.post(`/broadcasts/:broadcastId/${operation}`, { schema: { tags, summary, params: BroadcastParams, response: one } }, (req) => service[operation](caller(req.auth), req.params.broadcastId));
  }

  app.post(
    '/broadcasts/:broadcastId/test',
    {
      schema: {
        tags,
        summary: 'Send the broadcast to 1-5 addresses through POST /send (not counted in the broadcast)',
        params: BroadcastParams,
        body: TestBody,
        response: withErrors({ 200: Type.Object({ sent: Type.Array(Type.Object({ email: Type.String(), trackingId: Type.String() })) }) }),
      },
    },
    (req) => broadcasts.tests.send(scope(req.auth), req.params.broadcastId, req.body.emails),
  );
  app.get(
    '/broadcasts/:broadcastId/metrics',
    { schema: { tags, summary: 'Recipients by state, skipped ones by why, and rates', params: BroadcastParams, response: withErrors({ 200: MetricsSchema }) } },
    (req) => broadcasts.reports.metrics(scope(req.auth), req.params.broadcastId),
  );
  app.get(
    '/broadcasts/:broadcastId/recipients',
    {
      schema: {
        tags,
        summary: 'The frozen audience in the order it was frozen, optionally of one state',
        params: BroadcastParams,
        querystring: RecipientsQuery,
        response: withErrors({ 200: Type.Object({ recipients: Type.Array(RecipientSchema), nextCursor: Type.Optional(Type.String()) }) }),
      },
    },
    (req) => broadcasts.reports.recipients(scope(req.auth), req.params.broadcastId, req.query),
  );
  app.get(
    '/broadcasts/:broadcastId/transitions',
    { schema: { tags, summary: 'Every operation applied to the broadcast, oldest first, with its time and actor', params: BroadcastParams, response: withErrors({ 200: Type.Object({ transitions: Type.Array(TransitionSchema) }) }) } },
    async (req) => ({ transitions: await service.history(scope(req.auth), req.params.broadcastId) }),
  );
}
