import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { type Dialect, type Storage, openStorage } from '../../src/storage/db.js';

/** The storage engines this run covers: SQLite always, PostgreSQL when DATABASE_URL is set. */
export const STORAGE_KINDS: Dialect[] = process.env.DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];

export interface TestStorage extends Storage {
  /** Removes the database file or schema. */
  destroy(): Promise<void>;
  /** Opens a second Storage on the same database (another "process"). */
  reopen(): Storage;
  location: string;
  /** PostgreSQL: the schema of this test database, and the one its pg-boss uses (dropped with it). */
  pgSchema?: string;
  bossSchema?: string;
}

/**
 * Kysely's Migrator introspects the tables of every schema (not only its own), so while other
 * test files create and drop their schemas on the same server, migrating can fail with a
 * relation, column or schema of another test that vanished mid-introspection ('relation
 * "kysely_migration_lock" does not exist', 'schema "t_..." does not exist', 'relation
 * "t_....slack_settings" does not exist', 'column "component_id" of relation "components" does
 * not exist'). Those are retried; a migration that is itself wrong still fails, at the 8th try.
 */
async function migrateBesideOtherTests(storage: Storage): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await storage.migrate();
      return;
    } catch (err) {
      const message = String((err as Error).message);
      const vanished = message.includes('does not exist');
      if (attempt >= 8 || !vanished) throw err;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 200));
    }
  }
}

/** A migrated, empty database: a temp SQLite file, or a fresh schema on the PostgreSQL server. */
export async function createTestStorage(kind: Dialect): Promise<TestStorage> {
  if (kind === 'postgres') {
    const url = process.env.DATABASE_URL;
    if (!url) throw new Error('DATABASE_URL is required for the postgres tier');
    const schema = `t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`create schema ${schema}`);
    await admin.end();
    const open = () => openStorage({ databaseUrl: url, pgSchema: schema, poolSize: 5 });
    const storage = open();
    await migrateBesideOtherTests(storage);
    return {
      ...storage,
      location: `${url} schema ${schema}`,
      pgSchema: schema,
      bossSchema: `${schema}_boss`,
      reopen: open,
      async destroy() {
        await storage.close().catch(() => undefined);
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        await client.query(`drop schema if exists ${schema} cascade`);
        await client.query(`drop schema if exists ${schema}_boss cascade`);
        await client.end();
      },
    };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-test-'));
  const file = path.join(dir, 'clarion.sqlite');
  const open = () => openStorage({ sqliteFile: file });
  const storage = open();
  await storage.migrate();
  return {
    ...storage,
    location: file,
    reopen: open,
    async destroy() {
      await storage.close().catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
