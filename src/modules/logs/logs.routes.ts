import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { SEND_CHANNELS } from '../sending/channels.js';
import {
  DEFAULT_EVENTS_PAGE,
  FILTER_CHANNELS,
  LOG_STATUSES,
  MAX_EVENTS_PAGE,
  type LogsService,
  MAX_FILTER_ITEMS,
  MAX_FILTER_LENGTH,
  MAX_RESULT_PAGE,
  MAX_TIMESTAMP_MS,
  MAX_TRACKING_IDS,
  MAX_TRACKING_ID_LENGTH,
  TAIL_SIZE,
  tooManyTrackingIds,
} from './logs.service.js';
import { fromOlderSdkQuery } from './older-sdk-query.js';

const LogRecordSchema = Type.Object({ trackingId: Type.String(), accountId: Type.String() }, { additionalProperties: true });
const LogsResponse = Type.Object({ logs: Type.Array(LogRecordSchema) });
const FilterString = (description?: string) => Type.String({ maxLength: MAX_FILTER_LENGTH, ...(description ? { description } : {}) });
const FilterList = (description?: string) => Type.Array(FilterString(description), { maxItems: MAX_FILTER_ITEMS });

export function logRoutes(app: App, deps: Pick<Deps, 'config'>, service: LogsService): void {
  const tags = ['logs'];

  app.get(
    '/logs/retention',
    { schema: { tags, summary: 'How long logs are kept', response: withErrors({ 200: Type.Object({ retentionInDays: Type.Number() }) }) } },
    () => ({ retentionInDays: deps.config.logRetentionDays }),
  );

  app.get(
    '/logs',
    {
      schema: {
        tags,
        summary: "The environment's delivery events (sent, delivered, failed, ...), newest first; pages linked by nextCursor",
        querystring: Type.Object({
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_EVENTS_PAGE, description: `events per page, default ${DEFAULT_EVENTS_PAGE}` })),
          cursor: Type.Optional(Type.String({ maxLength: 64, description: 'nextCursor of the previous page' })),
        }),
        response: withErrors({
          200: Type.Object({
            messages: Type.Array(
              Type.Object({ trackingId: Type.String(), eventType: Type.String(), timestamp: Type.String(), epochMs: Type.Number(), code: Type.Optional(Type.String()) }),
            ),
            nextCursor: Type.Optional(Type.String({ description: 'present while older events follow' })),
          }),
        }),
      },
    },
    (req) => service.events(req.auth, req.query),
  );

  // A static path: Fastify matches it before /logs/:trackingIds, so "tail" is never read as a tracking id.
  app.get(
    '/logs/tail',
    { schema: { tags, summary: `The environment's newest ${TAIL_SIZE} log records, newest first`, response: withErrors({ 200: LogsResponse }) } },
    async (req) => ({ logs: await service.tail(req.auth) }),
  );

  app.get(
    '/logs/query/:queryId',
    {
      schema: {
        tags,
        summary: 'Poll a log query until its status is Complete; its logs come in pages (nextToken)',
        params: Type.Object({ queryId: Type.String({ maxLength: 64 }) }),
        querystring: Type.Object({
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_RESULT_PAGE, description: `logs per page, default ${MAX_RESULT_PAGE}` })),
          nextToken: Type.Optional(Type.String({ maxLength: 32, description: 'from the previous page' })),
        }),
        response: withErrors({
          200: Type.Object({
            status: Type.String({ description: 'Running, Complete or Failed' }),
            logs: Type.Optional(Type.Array(LogRecordSchema)),
            nextToken: Type.Optional(Type.String({ description: 'present while more logs follow: pass it to get the next page' })),
            truncated: Type.Optional(Type.Boolean({ description: 'true when the search stopped at the size a stored result may hold: more logs matched (see message)' })),
            message: Type.Optional(Type.String({ description: 'with truncated: where and why the result stops' })),
            error: Type.Optional(Type.String()),
          }),
        }),
      },
    },
    (req) => service.queryResult(req.auth, req.params.queryId, req.query),
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
        body: Type.Object({ trackingIds: Type.Array(Type.String({ maxLength: MAX_TRACKING_ID_LENGTH }), { maxItems: MAX_TRACKING_IDS }) }),
        response: withErrors({ 200: LogsResponse }),
      },
      // Before the schema, so an oversized list answers as GET /logs/{ids} does, not VALIDATION_FAILED.
      preValidation: (req, _reply, done) => {
        const ids = (req.body as { trackingIds?: unknown } | null)?.trackingIds;
        done(Array.isArray(ids) && ids.length > MAX_TRACKING_IDS ? tooManyTrackingIds(ids.length) : undefined);
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
          dateRangeFilter: Type.Optional(
            Type.Array(Type.Number({ minimum: 0, maximum: MAX_TIMESTAMP_MS }), {
              minItems: 2,
              maxItems: 2,
              description: 'exactly 2 unix timestamps [start, end], in seconds (values over 1e12: milliseconds)',
            }),
          ),
          userFilter: Type.Optional(FilterString()),
          envIdFilter: Type.Optional(FilterList()),
          statusFilter: Type.Optional(FilterString(`one of ${LOG_STATUSES.join(', ')}`)),
          channelFilter: Type.Optional(FilterList(FILTER_CHANNELS.join(', '))),
          notificationFilter: Type.Optional(FilterList()),
        }, { additionalProperties: false }),
        response: withErrors({ 200: Type.Object({ queryId: Type.String() }) }),
      },
    },
    async (req) => ({ queryId: await service.startQuery(req.auth, req.body) }),
  );

  app.post(
    '/:clientId/logs/query',
    {
      schema: {
        tags,
        summary: 'Start an asynchronous log search (older server SDK queryLogs); poll GET /logs/query/{queryId}. Lists match any of their values; filters combine with AND',
        params: Type.Object({ clientId: Type.String() }),
        body: Type.Object({
          dateRangeFilter: Type.Optional(
            Type.Object({
              startTime: Type.Optional(Type.Number({ minimum: 0, maximum: MAX_TIMESTAMP_MS, description: 'unix timestamp in seconds (over 1e12: milliseconds)' })),
              endTime: Type.Optional(Type.Number({ minimum: 0, maximum: MAX_TIMESTAMP_MS, description: 'unix timestamp in seconds (over 1e12: milliseconds), inclusive' })),
            }),
          ),
          notificationFilter: Type.Optional(FilterList()),
          channelFilter: Type.Optional(FilterList(`${SEND_CHANNELS.map((c) => c.channel).join(', ')}, VOICE (or ${FILTER_CHANNELS.join(', ')})`)),
          userFilter: Type.Optional(FilterList()),
          statusFilter: Type.Optional(FilterList(LOG_STATUSES.join(', '))),
          trackingIds: Type.Optional(Type.Array(Type.String({ maxLength: MAX_TRACKING_ID_LENGTH }), { maxItems: MAX_FILTER_ITEMS })),
          requestFilter: Type.Optional(FilterList('sends whose request body contains any of these strings')),
          envIdFilter: Type.Optional(FilterList()),
          customFilter: Type.Optional(Type.String({ description: 'not supported: refused with VALIDATION_FAILED' })),
        }),
        response: withErrors({ 200: Type.Object({ queryId: Type.String() }) }),
      },
    },
    async (req) => ({ queryId: await service.startQuery(req.auth, fromOlderSdkQuery(req.body)) }),
  );
}
