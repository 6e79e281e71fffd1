import type { Deps } from './deps.js';
import { RenderPool } from './rendering/render-pool.js';
import type { Services } from './services.js';
import { registerLogJobs } from './modules/logs/logs.jobs.js';
import type { DeliveryWorker } from './modules/sending/delivery.worker.js';
import type { CallsStopOptions, DeliveryTiming } from './modules/sending/delivery-runs.js';
import { type Executors, buildExecutors } from './modules/sending/executors/index.js';
import { registerSendingJobs } from './modules/sending/sending.jobs.js';
import { registerMaintenanceJobs } from './modules/system/maintenance.jobs.js';
import type { InboundSmtpServer } from './modules/addresses/inbound-smtp.js';
import { registerDigestJobs } from './modules/digests/digests.jobs.js';
import { registerBroadcastJobs } from './modules/broadcasts/broadcasts.jobs.js';
import { registerDomainJobs } from './modules/domains/domains.jobs.js';
import { startWebhookJobs } from './modules/webhooks/webhooks.jobs.js';

export interface Workers {
  /** Channels this process can deliver. */
  executors: Executors;
  worker: DeliveryWorker;
  /** Purges old logs, idempotency keys and log queries once, now. */
  purge(): Promise<void>;
  /** Schedules this hour's purge job (one per hour across every process). */
  schedulePurge(): Promise<string>;
  /** Schedules this hour's check of due sender domains (one per hour across every process). */
  scheduleDomainChecks(): Promise<string>;
  /** Schedules this minute's sending of due digests (one per minute across every process). */
  scheduleDigests(): Promise<string>;
  /** Schedules this minute's start of due scheduled broadcasts (one per minute across every process). */
  scheduleBroadcastStarts(): Promise<string>;
  /** Schedules this minute's restart of quiet broadcast delivery chains (one per minute across every process). */
  scheduleBroadcastRecovery(): Promise<string>;
  /** The inbound SMTP server of this process; null when CLARION_INBOUND_SMTP_PORT is off. */
  inboundSmtp: InboundSmtpServer | null;
  stop(): Promise<void>;
}

const HOUR_MS = 3600 * 1000;
const MINUTE_MS = 60 * 1000;

/**
 * Registers every module's jobs (`<module>.jobs.ts`) on the queue and starts working; the API
 * process may run it too (role all), over the same services object as its routes.
 */
export async function startWorkers(deps: Deps, services: Services, options: { concurrency?: number } & Partial<DeliveryTiming> & CallsStopOptions = {}): Promise<Workers> {
  // One set of render threads for the process: planning's content and delivery's in-app batch copy.
  const renders = new RenderPool();
  const { executors, close: closeExecutors } = buildExecutors(deps, services, renders);
  const worker = registerSendingJobs(deps, services, executors, renders, options);
  registerLogJobs(deps, services.logs);
  const maintenance = registerMaintenanceJobs(deps);
  const domainJobs = registerDomainJobs(deps, services.domains);
  const digestJobs = registerDigestJobs(deps, services.digests);
  const broadcastJobs = registerBroadcastJobs(deps, services.broadcasts);
  await deps.queue.start();
  const webhooks = startWebhookJobs(services.webhooks);
  // Inbound mail is received where the workers run (roles all and worker): it records into the
  // ledger and the webhook outbox, like them, and the API process stays HTTP only.
  const { inboundSmtpPort, inboundSmtpHost, inboundMaxBytes } = deps.config;
  let inboundSmtp: InboundSmtpServer | null = null;
  if (inboundSmtpPort !== null) {
    try {
      // smtp-server is loaded only where inbound mail is received (docs/memory.md).
      const { InboundSmtpServer } = await import('./modules/addresses/inbound-smtp.js');
      inboundSmtp = await new InboundSmtpServer(services.inbound, deps.logger, { port: inboundSmtpPort, host: inboundSmtpHost, maxBytes: inboundMaxBytes }).listen();
    } catch (err) {
      await webhooks.stop();
      await deps.queue.stop();
      await renders.close();
      throw err;
    }
  }

  // Every hour (as before: not at start), each process schedules that hour's purge and sender
  // domain checks; each runs once.
  const schedule = () => {
    void maintenance.schedulePurge().catch((err) => deps.logger.warn({ err }, 'could not schedule the retention purge'));
    void domainJobs.scheduleChecks().catch((err) => deps.logger.warn({ err }, 'could not schedule the sender domain checks'));
  };
  const timer = setInterval(schedule, HOUR_MS);
  timer.unref();
  // Digests are due at a minute of the user's choosing: every minute, and once now, so those
  // that fell due while no worker ran go out at start.
  // Scheduled broadcasts likewise: each one also has a job at its sendAt; this catches up after a restart.
  const scheduleDigests = () => {
    void digestJobs.scheduleSweep().catch((err) => deps.logger.warn({ err }, 'could not schedule the sending of due digests'));
    void broadcastJobs.scheduleSweep().catch((err) => deps.logger.warn({ err }, 'could not schedule the start of due broadcasts'));
  };
  scheduleDigests();
  // Broadcast delivery chains that ended or stalled: every minute, not at start (the chains of
  // before a restart run their next step first).
  const everyMinute = () => {
    scheduleDigests();
    void broadcastJobs.scheduleRecovery().catch((err) => deps.logger.warn({ err }, 'could not schedule the recovery of broadcast delivery'));
  };
  const digestTimer = setInterval(everyMinute, MINUTE_MS);
  digestTimer.unref();

  let stopped: Promise<void> | null = null;
  return {
    executors,
    worker,
    purge: maintenance.purge,
    schedulePurge: maintenance.schedulePurge,
    scheduleDomainChecks: domainJobs.scheduleChecks,
    scheduleDigests: digestJobs.scheduleSweep,
    scheduleBroadcastStarts: broadcastJobs.scheduleSweep,
    scheduleBroadcastRecovery: broadcastJobs.scheduleRecovery,
    inboundSmtp,
    // Idempotent: a second stop waits for the first instead of closing connections twice.
    stop() {
      stopped ??= stopAll();
      return stopped;
    },
  };

  async function stopAll(): Promise<void> {
    clearInterval(timer);
    clearInterval(digestTimer);
    // From the stop's start, beside the queue's grace: no provider call starts any more, and those
    // under way (handed-over first attempts too, which no job holds) are recorded, up to a bound,
    // before the executors close under them and the caller closes storage.
    const calls = worker.stopCalls({ stopGraceMs: options.stopGraceMs, stopGraceTimer: options.stopGraceTimer });
    await inboundSmtp?.close();
    await webhooks.stop();
    await deps.queue.stop();
    await calls;
    await closeExecutors();
    await renders.close();
  }
}
