import type { Deps } from '../../deps.js';
import { AddressesRepository } from '../addresses/addresses.repository.js';
import { InappRepository } from '../inapp/inapp.repository.js';
import { LogsRepository } from '../logs/logs.repository.js';
import { RateLimitsRepository } from '../rate-limits/rate-limits.repository.js';
import { IdempotencyRepository } from '../sending/idempotency.repository.js';
import { SendGatesRepository } from '../sending/send-gates.repository.js';
import { TypesRepository } from '../types/types.repository.js';
import { WebhooksRepository } from '../webhooks/webhooks.repository.js';

export const PURGE_JOB = 'system.purge';

const DAY_MS = 24 * 3600 * 1000;

export interface Maintenance {
  /**
   * Purges old logs and delivery events (CLARION_LOG_RETENTION_DAYS), the in-app notifications and
   * logs of types past their own `retention`, idempotency keys, ended dedup/throttle windows,
   * ended rate-limit windows and log queries, now.
   */
  purge: () => Promise<void>;
  /**
   * Schedules this hour's purge. Every worker process calls it every hour; the job's key is the
   * hour, so across processes the purge runs once an hour (the queue keeps one job per key).
   */
  schedulePurge: () => Promise<string>;
}

/** The maintenance jobs: the hourly retention purge. */
export function registerMaintenanceJobs(deps: Deps): Maintenance {
  const purge = async () => {
    const now = deps.clock.now().getTime();
    // Messages with their deliveries and attempts, delivery events and provider reports, in batches.
    await deps.ledger.purgeBefore(new Date(now - deps.config.logRetentionDays * DAY_MS).toISOString());
    // Webhook events and attempts go with the same retention (pending deliveries stay until settled).
    await new WebhooksRepository(deps.db, deps.storage.dialect).purgeBefore(new Date(now - deps.config.logRetentionDays * DAY_MS).toISOString());
    // Inbound mail records go with the logs.
    await new AddressesRepository(deps.db).purgeBefore(new Date(now - deps.config.logRetentionDays * DAY_MS).toISOString());
    await purgeTypeRetention(deps, now);
    await new IdempotencyRepository(deps.db).purgeBefore(new Date(now - DAY_MS).toISOString());
    // Deduplication claims and throttle counters whose window ended.
    await new SendGatesRepository(deps.db).purgeEndedBefore(new Date(now).toISOString());
    await new LogsRepository(deps.db).purgeQueriesBefore(new Date(now - DAY_MS).toISOString());
    // Request rate-limit counters whose window ended (PostgreSQL; SQLite counts in memory).
    await new RateLimitsRepository(deps.db).purgeEndedBefore(new Date(now).toISOString());
  };
  deps.queue.work(PURGE_JOB, () => purge(), { concurrency: 1 });
  return {
    purge,
    // A few attempts within the hour; a purge that fails for good is done by the next hour's.
    schedulePurge: () => deps.queue.enqueue(deps.db, PURGE_JOB, {}, { key: deps.clock.now().toISOString().slice(0, 13), maxAttempts: 3 }),
  };
}

/**
 * A type's `retention` (days): its in-app notifications stored, and its messages (with their
 * deliveries and attempts) received, more than that long ago go, environment by environment and
 * type by type. A retention longer than the server's keeps in-app notifications that long (they
 * have no other purge); its logs still go with the server-wide retention above.
 */
async function purgeTypeRetention(deps: Pick<Deps, 'db' | 'ledger'>, now: number): Promise<void> {
  const inapp = new InappRepository(deps.db);
  for (const type of await new TypesRepository(deps.db).withRetention()) {
    const before = new Date(now - (type.retention ?? 0) * DAY_MS).toISOString();
    while ((await inapp.purgeTypeBefore(type.env_id, type.notification_id, before)) > 0) {
      // next batch
    }
    await deps.ledger.purgeTypeBefore(type.env_id, type.notification_id, before);
  }
}
