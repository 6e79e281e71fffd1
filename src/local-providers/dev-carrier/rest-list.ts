/**
 * The Messages.json and Calls.json lists of the Twilio REST API as the development carrier
 * answers them (GET, newest first): filtered by `To`, `From` and the date filters Twilio names
 * (`DateSent`, `DateSent>`, `DateSent<` on a message's date_sent; `StartTime`, `StartTime>`,
 * `StartTime<` on a call's start_time), each a YYYY-MM-DD in GMT and inclusive, as Twilio reads
 * `DateSent>=2024-05-01`. A resource without that date (queued) is left out of a date filter.
 * One page of `PageSize` (default 50, at most 1000); the carrier keeps no further pages.
 */

export type ListParams = Record<string, string | undefined>;

export const LIST_MAX_PAGE_SIZE = 1000;

/** The filters of one list request, read from its query parameters. */
export function listFilter(kind: 'sms' | 'call', params: ListParams): { to?: string; from?: string; pageSize: number; keeps: (resource: Record<string, unknown>) => boolean } {
  const dateParam = kind === 'sms' ? 'DateSent' : 'StartTime';
  const dateField = kind === 'sms' ? 'date_sent' : 'start_time';
  const [on, after, before] = [params[dateParam], params[`${dateParam}>`], params[`${dateParam}<`]];
  const size = Number(params.PageSize ?? 50);
  return {
    to: params.To || undefined,
    from: params.From || undefined,
    pageSize: Number.isInteger(size) && size > 0 ? Math.min(size, LIST_MAX_PAGE_SIZE) : 50,
    keeps: (resource) => {
      if (!on && !after && !before) return true;
      const value = resource[dateField];
      if (typeof value !== 'string') return false;
      const day = new Date(value).toISOString().slice(0, 10);
      return (!on || day === on) && (!after || day >= after) && (!before || day <= before);
    },
  };
}

/** The page document: the resources under `messages` or `calls`, with Twilio's paging fields. */
export function listPage(kind: 'sms' | 'call', resources: Record<string, unknown>[], uri: string, pageSize: number): Record<string, unknown> {
  return {
    [kind === 'sms' ? 'messages' : 'calls']: resources,
    uri,
    first_page_uri: uri,
    next_page_uri: null,
    previous_page_uri: null,
    page: 0,
    page_size: pageSize,
    start: 0,
    end: Math.max(0, resources.length - 1),
  };
}
