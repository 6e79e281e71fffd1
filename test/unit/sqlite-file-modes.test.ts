import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { loadRootKey } from '../../src/secrets.js';
import { openStorage } from '../../src/storage/db.js';

const mode = (p: string) => fs.statSync(p).mode & 0o777;
const roots: string[] = [];

function freshRoot(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-modes-'));
  roots.push(root);
  return root;
}

afterEach(() => {
  for (const root of roots.splice(0)) fs.rmSync(root, { recursive: true, force: true });
});

describe('files the server creates under the data dir', () => {
  it('creates the data dir 0700 and the SQLite database, -wal and -shm 0600', async () => {
    const dataDir = path.join(freshRoot(), 'data', 'nested');
    const file = path.join(dataDir, 'clarion.sqlite');
    const storage = openStorage({ sqliteFile: file });
    try {
      await storage.migrate();
      await sql`create table mode_probe (x integer)`.execute(storage.db);
      await sql`insert into mode_probe values (1)`.execute(storage.db);
      // While open, WAL mode keeps both side files.
      expect(fs.existsSync(`${file}-wal`)).toBe(true);
      expect(fs.existsSync(`${file}-shm`)).toBe(true);
      expect(mode(dataDir)).toBe(0o700);
      expect(mode(path.dirname(dataDir))).toBe(0o700);
      expect(mode(file)).toBe(0o600);
      expect(mode(`${file}-wal`)).toBe(0o600);
      expect(mode(`${file}-shm`)).toBe(0o600);
    } finally {
      await storage.close();
    }
  });

  it('reopens an existing database without touching it', async () => {
    const file = path.join(freshRoot(), 'clarion.sqlite');
    const first = openStorage({ sqliteFile: file });
    await sql`create table kept (x integer)`.execute(first.db);
    await first.close();
    const again = openStorage({ sqliteFile: file });
    try {
      const { rows } = await sql<{ name: string }>`select name from sqlite_master where name = 'kept'`.execute(again.db);
      expect(rows).toEqual([{ name: 'kept' }]);
    } finally {
      await again.close();
    }
  });

  it('creates the data dir 0700 for the secret key when it is the first file', () => {
    const dataDir = path.join(freshRoot(), 'data');
    loadRootKey(undefined, dataDir);
    expect(mode(dataDir)).toBe(0o700);
    expect(mode(path.join(dataDir, 'secret.key'))).toBe(0o600);
  });
});
