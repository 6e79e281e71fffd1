// A message whose processing fails for good ends failed in its log, with a code and the reason,
// instead of staying queued once the queue gives its job up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('final failure of a message (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    // Job retries after 1-2 ms, so a job reaches its last attempt at once.
    t = await createTestContext(kind, { workers: true, queue: { backoff: { baseMs: 2, capMs: 2 } } });
  });
  afterAll(() => t.close());

  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs?.[0];

  it('records PROCESSING_FAILED and the reason when processing throws on every attempt', async () => {
    const inapp = t.workers!.executors.INAPP_WEB!;
    const preview = inapp.preview;
    // A dependency of processing that fails every time (not a render error, which fails one channel).
    inapp.preview = (content) => {
      if (String(content.title).startsWith('broken')) throw new Error('preview exploded');
      return preview.call(inapp, content);
    };
    try {
      const sends = await Promise.all(
        ['broken one', 'fine', 'broken two'].map((title) =>
          t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'final_failure', to: { id: 'ff-user' }, inapp: { title } } }),
        ),
      );
      for (const res of sends) expect(res.statusCode).toBe(202);
      const [broken1, fine, broken2] = sends.map((r) => r.json().trackingId as string);

      for (const trackingId of [broken1, broken2]) {
        const record = await eventually(async () => {
          const l = await log(trackingId);
          return l?.failed_at ? l : undefined;
        }, 20_000, `final failure of ${trackingId}`);
        expect(record.failed_code).toBe('PROCESSING_FAILED');
        expect(record.failed_internal).toContain('preview exploded');
        expect(record.inapp_sent_at).toBeUndefined();
      }
      const ok = await eventually(async () => {
        const l = await log(fine);
        return l?.inapp_delivered_at ? l : undefined;
      }, 20_000, 'the good message delivered');
      expect(ok.failed_code).toBeUndefined();
    } finally {
      inapp.preview = preview;
    }
  });
});
