import type { Logger } from 'pino';
import type { DeliveryEventsTable } from './delivery.tables.js';
import type { LedgerReport, ReportedAttempt } from './ledger-report.js';

/** Upper bounds (seconds) of the provider latency histogram: a local store takes milliseconds, a slow SMTP server tens of seconds. */
export const PROVIDER_LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * What a delivery came to, as counted: each applied transition into one of these states counts
 * once (an SMS the carrier confirms counts as sent, then as delivered), `retried` counts an
 * attempt that failed and will be made again, `skipped` a channel routing left out.
 */
export const DELIVERY_OUTCOMES = ['sent', 'delivered', 'failed', 'skipped', 'retried', 'digested', 'retracted'] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];
const COUNTED_STATES = new Set<string>(DELIVERY_OUTCOMES);

/** One channel's provider calls: latency buckets (not cumulative), sum and count. */
export interface LatencyTally {
  channel: string;
  buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * Watches what the delivery ledger commits (DeliveryLedger.transaction hands it each committed
 * transaction's report): the one place that writes a warning line for every retry and every
 * final failure, and that tallies deliveries by channel and outcome and provider latency for
 * `/metrics`. Tallies are plain numbers, read at scrape (delivery-metrics.ts), so a commit pays
 * a few map lookups, not a prom-client label hash per message. Per process: Prometheus sums the
 * processes it scrapes.
 *
 * The lines carry ids, channel, codes and the provider's error text; never the message content or
 * a credential. The provider's text is what `<channel>_failed_internal` shows in the log record
 * too (an SMTP server's may name the recipient's address).
 */
export class DeliveryOutcomes {
  /** `${channel} ${outcome}` -> how many since this process started. */
  private readonly counts = new Map<string, { channel: string; outcome: DeliveryOutcome; count: number }>();
  private readonly latency = new Map<string, LatencyTally>();

  constructor(private readonly logger: Logger) {}

  /** Called once a ledger transaction committed. */
  committed(report: LedgerReport): void {
    let failedAttempts: Map<string, ReportedAttempt> | null = null;
    for (const event of report.events) {
      if (event.kind === 'delivery') {
        if (!event.channel || !COUNTED_STATES.has(event.to_state)) continue;
        this.count(event.channel, event.to_state as DeliveryOutcome);
        if (event.to_state !== 'failed') continue;
        failedAttempts ??= new Map(report.attempts.filter((a) => a.attempt.outcome === 'failed').map((a) => [a.delivery.id, a]));
        this.logFailure(event, failedAttempts.get(event.delivery_id ?? ''), report.reasons);
      } else if (event.to_state === 'processed' && event.details) {
        // Routing's skipped channels ride on the message's processed event (transitions.ts).
        const skipped = (JSON.parse(event.details) as { skipped?: Record<string, string> }).skipped;
        for (const channel of Object.keys(skipped ?? {})) this.count(channel, 'skipped');
      } else if (event.to_state === 'failed') {
        this.logger.warn({ trackingId: event.tracking_id, code: event.code, error: report.reasons.get(event.tracking_id) }, 'message failed before delivery');
      }
    }
    for (const reported of report.attempts) {
      this.observeLatency(reported);
      if (reported.attempt.outcome !== 'retry') continue;
      this.count(reported.delivery.channel, 'retried');
      const { delivery, attempt } = reported;
      this.logger.warn(
        {
          channel: delivery.channel,
          trackingId: delivery.tracking_id,
          deliveryId: delivery.id,
          attempt: attempt.attempt,
          providerCode: attempt.provider_code,
          error: attempt.detail,
          nextAttemptAt: reported.retryAt,
        },
        'delivery attempt failed; retrying',
      );
    }
  }

  /** Deliveries counted so far, by channel and outcome. */
  countsByOutcome(): Iterable<{ channel: string; outcome: DeliveryOutcome; count: number }> {
    return this.counts.values();
  }

  /** Provider latency so far, by channel. */
  latencyByChannel(): Iterable<LatencyTally> {
    return this.latency.values();
  }

  private logFailure(event: DeliveryEventsTable, attempt: ReportedAttempt | undefined, reasons: ReadonlyMap<string, string>): void {
    this.logger.warn(
      {
        channel: event.channel,
        trackingId: event.tracking_id,
        deliveryId: event.delivery_id,
        code: event.code,
        // Absent when no provider call failed it (its content could not be rendered, its job was given up, a carrier's report).
        ...(attempt ? { attempt: attempt.attempt.attempt, providerCode: attempt.attempt.provider_code } : {}),
        error: reasons.get(event.delivery_id ?? '') ?? attempt?.attempt.detail ?? undefined,
      },
      'delivery failed',
    );
  }

  private count(channel: string, outcome: DeliveryOutcome): void {
    const key = `${channel} ${outcome}`;
    const tally = this.counts.get(key);
    if (tally) tally.count++;
    else this.counts.set(key, { channel, outcome, count: 1 });
  }

  private observeLatency({ delivery, attempt }: ReportedAttempt): void {
    let tally = this.latency.get(delivery.channel);
    if (!tally) {
      tally = { channel: delivery.channel, buckets: new Float64Array(PROVIDER_LATENCY_BUCKETS.length), sum: 0, count: 0 };
      this.latency.set(delivery.channel, tally);
    }
    const seconds = attempt.duration_ms / 1000;
    const bucket = PROVIDER_LATENCY_BUCKETS.findIndex((le) => seconds <= le);
    if (bucket >= 0) tally.buckets[bucket]++;
    tally.sum += seconds;
    tally.count++;
  }
}
