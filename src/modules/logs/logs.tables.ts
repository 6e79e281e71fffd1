import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { SendingTables } from '../sending/sending.tables.js';

/** One log a finished query found (migration 0067). */
export type LogQueryResultsTable = {
  query_id: string;
  account_id: string;
  /** 0-based rank in the result (newest first). */
  position: number;
  /** The Log record, as JSON. */
  log: string;
};

export type LogsTables = SendingTables & { log_query_results: LogQueryResultsTable };
export type LogsDb = Kysely<CoreTables & LogsTables>;
