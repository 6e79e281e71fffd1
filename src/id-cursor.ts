import { invalid } from './errors.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The cursor of a list keyed by UUIDv7 ids, newest first (broadcasts, webhook attempts): the
 * last id of the previous page, or none (or empty) for the first page. Anything else is refused
 * rather than read as an id, which would answer a wrong page (a first page, or an empty one).
 */
export function idCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  if (!UUID.test(cursor)) throw invalid('cursor is not a cursor of this list.', 'Pass the nextCursor of the previous page unchanged, or no cursor for the first page.');
  return cursor;
}
