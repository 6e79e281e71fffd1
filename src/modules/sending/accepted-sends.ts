import type { Deps } from '../../deps.js';
import { MessagesRepository } from './messages.repository.js';
import { SendIntakeRepository } from './send-intake.repository.js';
import type { MessageRow } from './sending.tables.js';

/**
 * An account's accepted sends by tracking id, newest first: stored messages and, on SQLite, the
 * sends still waiting in the intake journal (accepted, not yet ingested; their state is
 * 'queued'). A send ingested between the two reads is written to messages before it leaves the
 * journal, so the last read finds it. Every lookup of a send by id goes through here.
 */
export async function acceptedSendsByIds(deps: Deps, accountId: string, ids: string[]): Promise<MessageRow[]> {
  const messages = new MessagesRepository(deps.db);
  const stored = await messages.messagesByIds(accountId, ids);
  if (deps.storage.dialect !== 'sqlite' || stored.length === ids.length) return stored;
  const found = new Set(stored.map((m) => m.tracking_id));
  const pending = await new SendIntakeRepository(deps.db).pendingByIds(accountId, ids.filter((id) => !found.has(id)));
  for (const m of pending) found.add(m.tracking_id);
  const moved = await messages.messagesByIds(accountId, ids.filter((id) => !found.has(id)));
  return [...stored, ...pending, ...moved].sort((a, b) => (a.received_at < b.received_at ? 1 : a.received_at > b.received_at ? -1 : 0));
}
