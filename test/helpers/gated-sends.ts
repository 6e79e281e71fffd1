import { expect } from 'vitest';
import type { Deps } from '../../src/deps.js';
import type { App } from '../../src/http/types.js';
import { eventually } from './wait.js';

/** POSTs `payloads` to /send at once (each its own request), each answered 200; their trackingIds in order. */
export async function sendAtOnce(app: App, auth: Record<string, string>, payloads: Record<string, unknown>[], headers: (i: number) => Record<string, string> = () => ({})): Promise<string[]> {
  const answers = await Promise.all(payloads.map((payload, i) => app.inject({ method: 'POST', url: '/send', headers: { ...auth, ...headers(i) }, payload })));
  for (const res of answers) expect(res.statusCode, res.body).toBe(200);
  return answers.map((res) => res.json<{ trackingId: string }>().trackingId);
}

/** Waits until every message of `trackingIds` is processed (routed); answers, per message, its skipped channels and its delivered deliveries. */
export async function routed(deps: Deps, trackingIds: string[], timeoutMs = 30_000): Promise<{ trackingId: string; skipped: Record<string, string>; delivered: number }[]> {
  const unique = [...new Set(trackingIds)];
  const rows = await eventually(
    async () => {
      const found = (await deps.db
        .selectFrom('messages' as never)
        .select(['tracking_id' as never, 'skipped' as never, 'state' as never])
        .where('tracking_id' as never, 'in', unique as never)
        .execute()) as { tracking_id: string; skipped: string | null; state: string }[];
      return found.length === unique.length && found.every((m) => m.state === 'processed') ? found : undefined;
    },
    timeoutMs,
    `${unique.length} messages processed`,
  );
  const deliveries = (await deps.db
    .selectFrom('deliveries' as never)
    .select(['tracking_id' as never, 'status' as never])
    .where('tracking_id' as never, 'in', unique as never)
    .execute()) as { tracking_id: string; status: string }[];
  return rows.map((m) => ({
    trackingId: m.tracking_id,
    skipped: m.skipped ? (JSON.parse(m.skipped) as Record<string, string>) : {},
    delivered: deliveries.filter((d) => d.tracking_id === m.tracking_id && d.status === 'delivered').length,
  }));
}

/** How many of the routed messages were delivered, and how many skipped by `reason` on `channel`. */
export function tally(messages: Awaited<ReturnType<typeof routed>>, reason: string, channel = 'inapp'): { delivered: number; skipped: number } {
  return { delivered: messages.filter((m) => m.delivered > 0).length, skipped: messages.filter((m) => m.skipped[channel] === reason).length };
}
