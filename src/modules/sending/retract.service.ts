import type { Deps } from '../../deps.js';
import { invalid } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { LedgerSession } from '../delivery/ledger.js';
import { InappRepository } from '../inapp/inapp.repository.js';
import { MessagesRepository } from './messages.repository.js';
import { RetractRepository, type RetractTarget } from './retract.repository.js';

export type { RetractTarget };

/** The body of POST /{clientId}/sender/retract (the older server SDK's RetractRequest). */
export interface RetractRequest {
  notificationId: string;
  userId: string;
  /** The older name of subNotificationId (as in a send). */
  secondaryId?: string;
  subNotificationId?: string;
}

/** What a retract changed (the route's answer). */
export interface RetractResult {
  /** Every send the retract changed something of. */
  trackingIds: string[];
  /** In-app notifications removed from the user's inbox. */
  inappNotifications: number;
  /** Deliveries retracted: pending ones (never made) and the in-app ones removed. */
  deliveries: number;
  /** Sends retracted before they were processed (queued or scheduled): they make no deliveries. */
  messages: number;
}

/**
 * A part that holds more of a send to take back, run inside the retract's transaction with the
 * retracted sends' tracking ids; answers the tracking ids it changed something of. The hook for
 * digests: a send's items collected for a digest not sent yet belong here.
 */
export type RetractStep = (tx: LedgerSession, scope: EnvScope, target: RetractTarget, trackingIds: string[], at: string) => Promise<string[]>;

/**
 * Retract ("un-send"): takes back what a user has not received yet of their sends of a type (or
 * of one sub-notification), and removes their in-app notifications of it. In one transaction,
 * through the delivery ledger (the only writer of messages and deliveries): sends not processed
 * yet and pending deliveries become `retracted`, their in-app notifications are deleted and
 * their in-app deliveries become `retracted`; what another channel already sent stays sent.
 * Once committed, the user's connected in-app clients are told which notifications went.
 */
export class RetractService {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'clock' | 'ledger' | 'inappRealtime'>,
    private readonly steps: RetractStep[] = [],
  ) {}

  async retract(scope: EnvScope, request: RetractRequest): Promise<RetractResult> {
    const target = targetOf(request);
    const at = this.deps.clock.now().toISOString();
    const inappScope = { ...scope, userId: target.userId };
    // SQLite: sends accepted a moment ago may still wait in the intake journal; as rows they are retracted too.
    await new MessagesRepository(this.deps.db).flushAccepted();
    const { result, removed } = await this.deps.ledger.transaction(async (tx) => {
      const trackingIds = await new RetractRepository(tx.db).retractable(scope, target);
      const { messages, deliveries } = await tx.retract(trackingIds, at);
      // After the ledger's updates: one that waited for a worker's commit (a send being routed
      // right now, PostgreSQL) retracted its in-app delivery, and this later statement sees its row.
      const removed = await new InappRepository(tx.db).deleteOfType(inappScope, target.notificationId, target.subNotificationId);
      const touched = new Set([...removed, ...messages, ...deliveries.map((d) => d.tracking_id)]);
      for (const step of this.steps) for (const id of await step(tx, scope, target, trackingIds, at)) touched.add(id);
      const result: RetractResult = { trackingIds: [...touched].sort(), inappNotifications: removed.length, deliveries: deliveries.length, messages: messages.length };
      return { result, removed };
    });
    await this.deps.inappRealtime.publishRetracted(inappScope, removed);
    return result;
  }
}

function targetOf(request: RetractRequest): RetractTarget {
  const { secondaryId, subNotificationId } = request;
  if (secondaryId !== undefined && subNotificationId !== undefined && secondaryId !== subNotificationId) {
    throw invalid('secondaryId and subNotificationId differ: secondaryId is the older name of subNotificationId.', 'Send one of them.');
  }
  const sub = subNotificationId ?? secondaryId;
  return { notificationId: request.notificationId, userId: request.userId, ...(sub !== undefined ? { subNotificationId: sub } : {}) };
}
