import { Counter, Registry, collectDefaultMetrics, type MetricValueWithName } from 'prom-client';
import type { App } from './types.js';

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const LATENCY_NAME = 'clarion_http_request_duration_seconds';
const LATENCY_HELP = 'HTTP request latency by route and method';

/** One method and route's answers: latency buckets (not cumulative), sum, and counts by status. */
interface RouteTally {
  labels: { method: string; route: string };
  buckets: Float64Array;
  sum: number;
  count: number;
  /** Status code -> answers not yet added to the requests counter. */
  statuses: Map<number, number>;
}

/**
 * Per-app Prometheus registry (not the global one, so several apps can live in one test process).
 *
 * Each answer is tallied in plain numbers per method and route, and handed to prom-client when
 * /metrics is read: its counter and histogram hash their label objects on every call, which cost
 * about 3 µs of the 45 a POST /send took (issue 11, CPU per request at 50 connections). The
 * exposition is the same: `clarion_http_requests_total` is prom-client's counter (updated at
 * scrape), the latency histogram is written in prom-client's format by `latencyMetric`.
 */
export function installMetrics(app: App): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'clarion_' });
  const tallies = new Map<string, RouteTally>();
  new Counter({
    name: 'clarion_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
    collect() {
      for (const tally of tallies.values()) {
        for (const [status, n] of tally.statuses) {
          if (n > 0) this.inc({ ...tally.labels, status: String(status) }, n);
        }
        tally.statuses.clear();
      }
    },
  });
  registry.registerMetric(latencyMetric(tallies) as never);

  app.addHook('onResponse', (request, reply, done) => {
    // The route pattern, not the raw URL, keeps label cardinality bounded.
    const route = request.routeOptions.url ?? 'unmatched';
    const key = `${request.method} ${route}`;
    let tally = tallies.get(key);
    if (!tally) {
      tally = { labels: { method: request.method, route }, buckets: new Float64Array(LATENCY_BUCKETS.length), sum: 0, count: 0, statuses: new Map() };
      tallies.set(key, tally);
    }
    const seconds = reply.elapsedTime / 1000;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      if (seconds <= LATENCY_BUCKETS[i]) {
        tally.buckets[i]++;
        break;
      }
    }
    tally.sum += seconds;
    tally.count++;
    const status = reply.statusCode;
    tally.statuses.set(status, (tally.statuses.get(status) ?? 0) + 1);
    done();
  });
  return registry;
}

/** The latency histogram as a prom-client metric (what its Histogram exports, from the tallies). */
function latencyMetric(tallies: Map<string, RouteTally>) {
  const values = (): MetricValueWithName<string>[] => {
    const out: MetricValueWithName<string>[] = [];
    for (const { labels, buckets, sum, count } of tallies.values()) {
      let cumulative = 0;
      LATENCY_BUCKETS.forEach((le, i) => {
        cumulative += buckets[i];
        out.push({ labels: { le, ...labels }, value: cumulative, metricName: `${LATENCY_NAME}_bucket` });
      });
      out.push({ labels: { le: '+Inf', ...labels }, value: count, metricName: `${LATENCY_NAME}_bucket` });
      out.push({ labels: { ...labels }, value: sum, metricName: `${LATENCY_NAME}_sum` });
      out.push({ labels: { ...labels }, value: count, metricName: `${LATENCY_NAME}_count` });
    }
    return out;
  };
  return {
    name: LATENCY_NAME,
    help: LATENCY_HELP,
    type: 'histogram',
    aggregator: 'sum',
    get: () => Promise.resolve({ name: LATENCY_NAME, help: LATENCY_HELP, type: 'histogram', values: values(), aggregator: 'sum' }),
    reset: () => {
      for (const tally of tallies.values()) {
        tally.buckets.fill(0);
        tally.sum = 0;
        tally.count = 0;
      }
    },
  };
}
