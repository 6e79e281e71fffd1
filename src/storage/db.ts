import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import SQLite from 'better-sqlite3';
import { type Migration, type MigrationProvider, Kysely, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { PgClient } from './pg-client.js';
import type { CoreTables } from './schema.js';
import { type WalCheckpointer, startWalCheckpointer } from './wal-checkpointer.js';

export type Dialect = 'sqlite' | 'postgres';

export interface Storage {
  db: Kysely<CoreTables>;
  dialect: Dialect;
  /**
   * The SQLite connection under `db` (SQLite only), its prepare() cached by SQL text, for the
   * few hot paths that run prepared statements (see heldSqlite). Use it only while holding
   * Kysely's connection (inside a transaction), so its statements never interleave with another
   * open Kysely transaction.
   */
  sqlite?: SQLite.Database;
  /** Runs migrations up to the latest; safe to call from several processes at once on PostgreSQL. */
  migrate(): Promise<string[]>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The SQLite connection under `db` when `db` is a transaction (which holds the connection, so a
 * statement on it joins that transaction), for repositories that run prepared statements on a
 * hot path; null otherwise (PostgreSQL, or outside a transaction).
 */
export function heldSqlite<DB>(db: Kysely<DB>, sqlite: SQLite.Database | undefined): SQLite.Database | null {
  return sqlite && db.isTransaction ? sqlite : null;
}

// Count columns come back as strings from pg (int8); read them as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

export interface StorageOptions {
  databaseUrl?: string;
  /** SQLite file path, or ':memory:' */
  sqliteFile?: string;
  /** PostgreSQL schema to use (tests isolate themselves in one schema each). */
  pgSchema?: string;
  poolSize?: number;
  /** Told when something degrades without failing a call (the WAL checkpoint thread stopped). */
  warn?: (message: string, error: Error) => void;
}

export function openStorage(options: StorageOptions): Storage {
  if (options.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      // Named prepared statements (prepared()), and deferred writes pipelined in transactions (deferred()).
      Client: PgClient,
      ...(options.pgSchema ? { options: `-c search_path=${options.pgSchema}` } : {}),
    });
    const db = new Kysely<CoreTables>({ dialect: new PostgresDialect({ pool }) });
    return wrap(db, 'postgres', options.pgSchema);
  }
  const file = options.sqliteFile ?? ':memory:';
  if (file !== ':memory:') createPrivateFile(file);
  const database = new SQLite(file);
  database.pragma('journal_mode = WAL');
  // NORMAL is durable across process crashes in WAL mode (only an OS crash can lose the last commits).
  database.pragma('synchronous = NORMAL');
  database.pragma('foreign_keys = ON');
  database.pragma('busy_timeout = 5000');
  database.pragma(`cache_size = -${SQLITE_CACHE_KIB}`);
  const checkpointer = file === ':memory:' ? null : checkpointOffThread(database, file, options.warn);
  // One statement cache for Kysely and the hot paths that prepare statements themselves.
  const cached = withStatementCache(database);
  const db = new Kysely<CoreTables>({ dialect: new SqliteDialect({ database: cached }) });
  const storage = wrap(db, 'sqlite');
  return {
    ...storage,
    sqlite: cached,
    async migrate() {
      const applied = await storage.migrate();
      refreshPlannerStatistics(database);
      return applied;
    },
    async close() {
      await checkpointer?.stop();
      await storage.close();
    },
  };
}

/**
 * The main connection's page cache, in KiB (SQLite's negative cache_size). better-sqlite3 builds
 * SQLite with 16 MB per connection, and a broadcast touches enough of the users, recipients,
 * messages and jobs tables to fill it: 15 MB of the process's peak. Pages it drops are read again
 * from the operating system's file cache. Measured (docs/memory.md): peak of a broadcast of 10,000
 * lower by ~14 MB, the seeded log queries and the send path no slower beyond the host's noise.
 */
export const SQLITE_CACHE_KIB = 2000;

/**
 * Checkpoints on their own thread (startWalCheckpointer), and none on the connection that
 * commits. The log is truncated back to 64 MB after it restarts, should a burst have grown it.
 * If the thread dies, this connection checkpoints again as SQLite does by default.
 */
function checkpointOffThread(database: SQLite.Database, file: string, warn: StorageOptions['warn']): WalCheckpointer {
  database.pragma(`journal_size_limit = ${64 * 1024 * 1024}`);
  const checkpointer = startWalCheckpointer(file, (error) => {
    database.pragma(`wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT}`);
    warn?.('the WAL checkpoint thread stopped; checkpoints run on the main thread again', error);
  });
  database.pragma('wal_autocheckpoint = 0');
  return checkpointer;
}
const SQLITE_DEFAULT_AUTOCHECKPOINT = 1000;

/**
 * Gives SQLite's query planner statistics (sqlite_stat1), as SQLite advises for long-lived
 * connections (PRAGMA optimize=0x10002 when opened): without them it guesses, and chose the
 * (account_id, received_at) index for a log query by user and date range over the one with the
 * user in it (migration 0069), reading a month of messages to find one user's: 1.3 s instead of
 * 0.1 ms with 1,000,000 messages (bench, "cost as the work grows"). optimize analyzes only the
 * tables never analyzed or grown much since; analysis_limit bounds each to a sample (about 1 s
 * for a store of that size, once; then nothing until a table grows tenfold).
 */
function refreshPlannerStatistics(database: SQLite.Database): void {
  database.pragma('analysis_limit = 400');
  database.pragma('optimize = 0x10002');
}

/**
 * The database holds every user's data: its directory is created 0700 and the file 0600 before
 * SQLite opens it, whatever the umask. SQLite gives the -wal and -shm files it creates the mode of
 * the main file, so they are 0600 too. An existing file keeps the mode its owner gave it.
 */
function createPrivateFile(file: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  let fd: number;
  try {
    fd = fs.openSync(file, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw err;
  }
  // openSync's mode is filtered by the umask; 0600 is what we mean.
  fs.fchmodSync(fd, 0o600);
  fs.closeSync(fd);
}

/**
 * Kysely prepares every query anew; preparing is a large share of a short query's cost on
 * better-sqlite3. Prepared statements are reusable, so keep them by SQL text (bounded: queries
 * with IN-lists of varying length make many texts).
 */
function withStatementCache(database: SQLite.Database, max = 1000): SQLite.Database {
  const cache = new Map<string, SQLite.Statement>();
  const prepare = (source: string) => {
    let statement = cache.get(source);
    if (!statement) {
      if (cache.size >= max) cache.clear();
      statement = database.prepare(source);
      cache.set(source, statement);
    }
    return statement;
  };
  return new Proxy(database, {
    get(target, prop) {
      if (prop === 'prepare') return prepare;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

const migrationFolder = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/**
 * Every file in migrations/ is one migration (taking a `Kysely<unknown>`: a migration describes
 * the schema as it was at its step, never the current table types), applied in name order. Each module adds its own
 * file (NNNN_<module>.ts). Our own import() (not Kysely's) so the same code loads .ts under
 * tsx/vitest and .js from dist.
 */
const folderMigrations: MigrationProvider = {
  async getMigrations() {
    const migrations: Record<string, Migration> = {};
    for (const file of (await fs.promises.readdir(migrationFolder)).sort()) {
      const match = /^(.+)\.(ts|js)$/.exec(file);
      if (!match || file.endsWith('.d.ts')) continue;
      migrations[match[1]] = (await import(pathToFileURL(path.join(migrationFolder, file)).href)) as Migration;
    }
    return migrations;
  },
};

function wrap(db: Kysely<CoreTables>, dialect: Dialect, schema?: string): Storage {
  return {
    db,
    dialect,
    async migrate() {
      const migrator = new Migrator({
        db,
        provider: folderMigrations,
        // With a non-default search_path, Kysely must look for its own tables in that schema only.
        ...(schema ? { migrationTableSchema: schema } : {}),
      });
      const { error, results } = await migrator.migrateToLatest();
      if (error) throw error instanceof Error ? error : new Error('migration failed', { cause: error });
      return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    },
    async ping() {
      await sql`select 1`.execute(db);
    },
    async close() {
      await db.destroy();
    },
  };
}
