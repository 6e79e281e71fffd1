import { ensureBuilt } from './process.js';

/** Says once, up front, which storage tiers this run covers; builds dist for the tests that start the CLI. */
export default function setup(): void {
  if (process.env.DATABASE_URL) {
    console.log(`[clarion tests] storage tiers: sqlite, postgres (${process.env.DATABASE_URL.replace(/\/\/[^@]*@/, '//***@')})`);
  } else {
    console.log('[clarion tests] PostgreSQL tier skipped: DATABASE_URL is not set. Only the SQLite tier runs.');
  }
  ensureBuilt();
}
