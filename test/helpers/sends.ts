import { expect } from 'vitest';
import type { Deps } from '../../src/deps.js';
import { parseMessages } from '../../src/modules/sending/messages.journal.js';
import type { TestContext } from './context.js';

/**
 * Accepted sends matching `where` (message columns): message rows, plus on SQLite the sends still
 * in the intake journal (`send_intake` chunks, not yet ingested by a worker).
 */
export async function countAcceptedSends(deps: Deps, where: Record<string, string> = {}): Promise<number> {
  let q = deps.db.selectFrom('messages' as never).select((eb) => eb.fn.countAll().as('n'));
  for (const [column, value] of Object.entries(where)) q = q.where(column as never, '=', value as never);
  const stored = Number(((await q.executeTakeFirstOrThrow()) as { n: number | string }).n);
  if (deps.storage.dialect !== 'sqlite') return stored;
  const chunks = (await deps.db.selectFrom('send_intake' as never).select('messages' as never).execute()) as { messages: string }[];
  const pending = chunks
    .flatMap((c) => parseMessages(c.messages) as unknown as Record<string, unknown>[])
    .filter((m) => Object.entries(where).every(([column, value]) => m[column] === value));
  return stored + pending.length;
}

/** POSTs one email send of `type` per recipient (user `${idPrefix}${i}`), each answered 200; answers their trackingIds in order. */
export async function sendEmails(t: Pick<TestContext, 'app' | 'auth'>, type: string, emails: string[], idPrefix = type): Promise<string[]> {
  const trackingIds: string[] = [];
  for (const [i, email] of emails.entries()) {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type, to: { id: `${idPrefix}${i}`, email }, email: { subject: `s${i}`, html: '<p>x</p>' } } });
    expect(res.statusCode).toBe(200);
    trackingIds.push(res.json<{ trackingId: string }>().trackingId);
  }
  return trackingIds;
}
