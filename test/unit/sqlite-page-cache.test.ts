import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SQLITE_CACHE_KIB, openStorage } from '../../src/storage/db.js';

const roots: string[] = [];

afterEach(() => {
  for (const root of roots.splice(0)) fs.rmSync(root, { recursive: true, force: true });
});

describe("the SQLite connection's page cache", () => {
  it('is bounded to SQLITE_CACHE_KIB, not better-sqlite3 16 MB default', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-cache-'));
    roots.push(root);
    const storage = openStorage({ sqliteFile: path.join(root, 'clarion.sqlite') });
    try {
      // Negative: a size in KiB.
      expect(storage.sqlite!.pragma('cache_size', { simple: true })).toBe(-SQLITE_CACHE_KIB);
      expect(SQLITE_CACHE_KIB).toBeLessThanOrEqual(4000);
    } finally {
      await storage.close();
    }
  });
});
