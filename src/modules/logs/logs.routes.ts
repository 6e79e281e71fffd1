import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { Queue } from '../../queue/port.js';
import { LOG_CHANNELS } from '../sending/channels.js';
import { LOG_STATUSES, LogsService } from './logs.service.js';

const LogRecordSchema = Type.Object({ trackingId: Type.String(), accountId: Type.String() }, { additionalProperties: true });
const LogsResponse = Type.Object({ logs: Type.Array(LogRecordSchema) });

export function logRoutes(app: App, deps: Deps, queue: Queue): void {
  const service = new LogsService(deps, queue);
  const tags = ['logs'];

  app.get(
    '/logs/retention',
    { schema: { tags, summary: 'How long logs are kept', response: withErrors({ 200: Type.Object({ retentionInDays: Type.Number() }) }) } },
    async () => ({ retentionInDays: deps.config.logRetentionDays }),
  );

  app.get(
    '/logs/query/:queryId',
    {
      schema: {
        tags,
        summary: 'Poll a log query until its status is Complete',
        params: Type.Object({ queryId: Type.String() }),
        response: withErrors({
          200: Type.Object({ status: Type.String(), logs: Type.Optional(Type.Array(LogRecordSchema)), error: Type.Optional(Type.String()) }),
        }),
      },
    },
    (req) => service.queryResult(req.auth, req.params.queryId),
  );

  app.get(
    '/logs/:trackingIds',
    {
      schema: {
        tags,
        summary: 'Logs by tracking id (comma separated, at most 25)',
        params: Type.Object({ trackingIds: Type.String() }),
        response: withErrors({ 200: LogsResponse }),
      },
    },
    async (req) => ({ logs: await service.byTrackingIds(req.auth, req.params.trackingIds.split(',')) }),
  );

  app.post(
    '/logs/bulk',
    {
      schema: {
        tags,
        summary: 'Logs by tracking id (at most 25)',
        body: Type.Object({ trackingIds: Type.Array(Type.String()) }),
        response: withErrors({ 200: LogsResponse }),
      },
    },
    async (req) => ({ logs: await service.byTrackingIds(req.auth, req.body.trackingIds) }),
  );

  app.post(
    '/logs/query',
    {
      schema: {
        tags,
        summary: 'Start an asynchronous log search; filters combine with AND',
        body: Type.Object({
          dateRangeFilter: Type.Optional(Type.Array(Type.Number(), { description: 'exactly 2 unix timestamps [start, end]' })),
          userFilter: Type.Optional(Type.String()),
          envIdFilter: Type.Optional(Type.Array(Type.String())),
          statusFilter: Type.Optional(Type.String({ description: `one of ${LOG_STATUSES.join(', ')}` })),
          channelFilter: Type.Optional(Type.Array(Type.String({ description: LOG_CHANNELS.join(', ') }))),
          notificationFilter: Type.Optional(Type.Array(Type.String())),
        }),
        response: withErrors({ 200: Type.Object({ queryId: Type.String() }) }),
      },
    },
    async (req) => ({ queryId: await service.startQuery(req.auth, req.body) }),
  );
}
