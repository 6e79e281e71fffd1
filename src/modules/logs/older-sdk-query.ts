import { invalid } from '../../errors.js';
import { type LogQueryInput, MAX_TIMESTAMP_MS, filterChannelLogName } from './logs.service.js';

/**
 * The body of the older server SDK's queryLogs (`POST /{clientId}/logs/query`): its own shape of
 * the filters POST /logs/query takes, plus a few more.
 */
export interface OlderSdkLogQuery {
  dateRangeFilter?: { startTime?: number; endTime?: number };
  notificationFilter?: string[];
  /** Channel enum values (EMAIL, INAPP_WEB, PUSH, ...); log names (email, inapp, ...) are taken too. */
  channelFilter?: string[];
  userFilter?: string[];
  statusFilter?: string[];
  trackingIds?: string[];
  requestFilter?: string[];
  envIdFilter?: string[];
  customFilter?: string;
}

/**
 * Translates the older SDK's query into the one POST /logs/query runs. An open end of the date
 * range is the start of time or the last storable instant. `customFilter` is the hosted
 * service's own query language, which Clarion does not have: refused, never ignored.
 */
export function fromOlderSdkQuery(body: OlderSdkLogQuery): LogQueryInput {
  if (body.customFilter !== undefined) {
    throw invalid(
      'customFilter is not supported: it is the hosted service\'s own query language.',
      'Use the other filters (dateRangeFilter, notificationFilter, channelFilter, userFilter, statusFilter, trackingIds, requestFilter, envIdFilter); they combine with AND.',
    );
  }
  const range = body.dateRangeFilter;
  const hasRange = range !== undefined && (range.startTime !== undefined || range.endTime !== undefined);
  return {
    ...(hasRange ? { dateRangeFilter: [range.startTime ?? 0, range.endTime ?? MAX_TIMESTAMP_MS] } : {}),
    ...(body.notificationFilter ? { notificationFilter: body.notificationFilter } : {}),
    ...(body.channelFilter ? { channelFilter: body.channelFilter.map(filterChannelLogName) } : {}),
    ...(body.userFilter ? { userFilter: body.userFilter } : {}),
    ...(body.statusFilter ? { statusFilter: body.statusFilter } : {}),
    ...(body.trackingIds ? { trackingIds: body.trackingIds } : {}),
    ...(body.requestFilter ? { requestFilter: body.requestFilter } : {}),
    ...(body.envIdFilter ? { envIdFilter: body.envIdFilter } : {}),
  };
}
