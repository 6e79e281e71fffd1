import type { MetricValueWithName, Registry } from 'prom-client';
import { type DeliveryOutcomes, PROVIDER_LATENCY_BUCKETS } from './delivery-outcomes.js';

const DELIVERIES_NAME = 'clarion_deliveries_total';
const DELIVERIES_HELP = 'Deliveries by channel and outcome (each transition into sent, delivered, failed, skipped, digested, retracted counts once; retried counts attempts that will be made again)';
const LATENCY_NAME = 'clarion_provider_latency_seconds';
const LATENCY_HELP = 'Duration of provider calls (one per delivery attempt, whatever its outcome) by channel';

/**
 * The ledger's delivery tallies (DeliveryOutcomes) as Prometheus metrics of `registry`: written
 * from the plain numbers at scrape, in the format prom-client's Counter and Histogram export,
 * as the HTTP latency histogram is (http/metrics.ts).
 */
export function registerDeliveryMetrics(registry: Registry, outcomes: DeliveryOutcomes): void {
  registry.registerMetric(
    scrapedMetric(DELIVERIES_NAME, DELIVERIES_HELP, 'counter', () =>
      [...outcomes.countsByOutcome()].map(({ channel, outcome, count }) => ({ labels: { channel, outcome }, value: count, metricName: DELIVERIES_NAME })),
    ) as never,
  );
  registry.registerMetric(
    scrapedMetric(LATENCY_NAME, LATENCY_HELP, 'histogram', () => {
      const out: MetricValueWithName<string>[] = [];
      for (const { channel, buckets, sum, count } of outcomes.latencyByChannel()) {
        let cumulative = 0;
        PROVIDER_LATENCY_BUCKETS.forEach((le, i) => {
          cumulative += buckets[i];
          out.push({ labels: { le, channel }, value: cumulative, metricName: `${LATENCY_NAME}_bucket` });
        });
        out.push({ labels: { le: '+Inf', channel }, value: count, metricName: `${LATENCY_NAME}_bucket` });
        out.push({ labels: { channel }, value: sum, metricName: `${LATENCY_NAME}_sum` });
        out.push({ labels: { channel }, value: count, metricName: `${LATENCY_NAME}_count` });
      }
      return out;
    }) as never,
  );
}

/** A metric prom-client's registry reads through get(); its values come from `values` at each scrape. */
function scrapedMetric(name: string, help: string, type: 'counter' | 'histogram', values: () => MetricValueWithName<string>[]) {
  return {
    name,
    help,
    type,
    aggregator: 'sum',
    get: () => Promise.resolve({ name, help, type, values: values(), aggregator: 'sum' }),
    // The tallies count since the process started, as a counter does; nothing to reset.
    reset: () => undefined,
  };
}
