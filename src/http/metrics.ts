import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { App } from './types.js';

/** Per-app Prometheus registry (not the global one, so several apps can live in one test process). */
export function installMetrics(app: App): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'clarion_' });
  const requests = new Counter({
    name: 'clarion_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'clarion_http_request_duration_seconds',
    help: 'HTTP request latency by route and method',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  app.addHook('onResponse', (request, reply, done) => {
    // The route pattern, not the raw URL, keeps label cardinality bounded.
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ method: request.method, route, status: String(reply.statusCode) });
    latency.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    done();
  });
  return registry;
}
