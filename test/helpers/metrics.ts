import type { App } from '../../src/http/types.js';

/** One scrape of /metrics: the value of a sample by name and labels (any order), or undefined when absent. */
export async function scrapeMetrics(app: App): Promise<{ body: string; value(name: string, labels?: Record<string, string>): number | undefined }> {
  const res = await app.inject({ method: 'GET', url: '/metrics' });
  if (res.statusCode !== 200) throw new Error(`/metrics answered ${res.statusCode}: ${res.body}`);
  const samples = res.body
    .split('\n')
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!match) throw new Error(`not a sample line: ${line}`);
      const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
      return { name: match[1], labels, value: Number(match[3]) };
    });
  return {
    body: res.body,
    value(name, labels = {}) {
      const found = samples.find((s) => s.name === name && Object.keys(s.labels).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
      return found?.value;
    },
  };
}
