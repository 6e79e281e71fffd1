import type { Deps } from '../../deps.js';
import { AppError } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { AccountsRepository } from '../accounts/accounts.repository.js';
import { currentCycleStart } from '../accounts/billing-cycle.js';
import type { IntakeUnit, SendIntake } from '../sending/intake.js';
import { internalMessageRow } from '../sending/message-rows.js';
import type { SendBody } from '../sending/sending.schemas.js';
import { PROCESS_MESSAGE_JOB } from '../sending/messages.repository.js';
import { parseRecipient } from '../users/users.service.js';
import { SYSTEM } from './broadcast-transitions.js';
import type { BroadcastsService } from './broadcasts.service.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import type { BroadcastRow, RecipientRow } from './broadcasts.tables.js';
import { type BroadcastPacing, pageSlots } from './broadcast-pacing.js';
import { STEP_MARK_INTERVAL_MS } from './delivery-recovery.js';
import { RecipientDeliveryRepository } from './recipient-delivery.repository.js';
import type { RecipientTracking } from './recipient-tracking.js';
import type { ReputationGuard } from './reputation-guard.js';
import { RecipientsRepository } from './recipients.repository.js';

/** How often a broadcast whose recipients are all handed over looks again for the ones in flight. */
export const TRACK_INTERVAL_MS = 1000;

/** How long a step waits while the broadcast has as many recipients in flight as it may. */
export const IN_FLIGHT_WAIT_MS = 250;

/** Recipients a broadcast may have handed over and not yet attempted (config.broadcastMaxInFlight). */
export function maxInFlight(config: Pick<Deps['config'], 'broadcastRate' | 'broadcastMaxInFlight'>): number {
  return config.broadcastMaxInFlight ?? Math.max(100, 2 * config.broadcastRate);
}

/** When the delivery job chain runs next. */
export interface NextStep {
  at: Date;
}

type HandOver = { kind: 'handed' | 'wait' | 'raced'; at: Date } | { kind: 'drained' } | { kind: 'cap' };

/** Thrown inside a page's transaction to roll it back: another run took its slots or cursor first. */
class Raced extends Error {}

/**
 * Delivery of a sending broadcast (docs/broadcasts.md "Delivery"), one step per run of its job:
 * hands over the next page of pending recipients, in seq order, to the bulk intake (one message
 * each, its own trackingId), paced by the account's and its sender domain's rates, in the
 * broadcast's fair share of them (BroadcastPacing); once every recipient is handed over,
 * follows the ones in flight (RecipientTracking) and completes the broadcast (sent) when none is
 * pending. A page is one transaction: the send cursor's move (guarded by the value read, the
 * status `sending` and the chain's token), the account's and its sender domain's slots
 * (BroadcastPacing), the messages and their jobs (due at their slot), and the recipients'
 * trackingIds. So a run twice, a pause or a cancel at any point, or a crash at any line hands
 * nobody over twice. Each step marks the broadcast row (send_step_at) now and then, so the
 * recovery sweep (DeliveryRecovery) can tell a live chain from one that ended or stalled.
 */
export class BroadcastDelivery {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'clock' | 'ids' | 'config' | 'logger'>,
    private readonly broadcasts: Pick<BroadcastsService, 'pauseBySystem' | 'transitions'>,
    private readonly intake: Pick<SendIntake, 'acceptWithin'>,
    private readonly tracking: Pick<RecipientTracking, 'syncInFlight'>,
    private readonly guard: Pick<ReputationGuard, 'check'>,
    private readonly pacing: Pick<BroadcastPacing, 'reserve' | 'take'>,
  ) {}

  /** One step of the chain `token`; null: the chain ends (not sending, another chain owns it, sent, paused). */
  async step(scope: EnvScope, id: string, token: string): Promise<NextStep | null> {
    const row = await new BroadcastsRepository(this.deps.db).find(scope, id);
    if (!row || row.status !== 'sending' || row.send_token !== token) return null;
    const now = this.deps.clock.now();
    if (row.send_step_at === null || now.getTime() - Date.parse(row.send_step_at) >= STEP_MARK_INTERVAL_MS) {
      await new BroadcastsRepository(this.deps.db).markStep(scope, id, token, now.toISOString());
    }
    if (row.send_cursor < row.frozen_count) {
      const why = await this.guard.check(scope, id);
      if (why) {
        this.deps.logger.warn({ broadcastId: id, envId: scope.envId, why }, 'broadcast paused by the reputation guard');
        await this.quietly(() => this.broadcasts.pauseBySystem(scope, id, 'REPUTATION_GUARD'));
        return null;
      }
      // Backpressure: hand over no more while deliveries lag (the guard just brought the in-flight
      // ones up to date), so a pause holds back all but these, and the guard judges before the rest goes.
      if ((await new RecipientsRepository(this.deps.db).countInFlight(scope, id, row.send_cursor)) >= maxInFlight(this.deps.config)) {
        return { at: new Date(now.getTime() + IN_FLIGHT_WAIT_MS) };
      }
    }
    const result = await this.handOver(scope, row, token, now);
    if (result.kind === 'cap') {
      await this.quietly(() => this.broadcasts.pauseBySystem(scope, id, 'PLAN_EXCEEDED'));
      return null;
    }
    if (result.kind !== 'drained') return { at: result.at };
    await this.tracking.syncInFlight(scope, id);
    if ((await new RecipientsRepository(this.deps.db).countPending(scope, id)) === 0) {
      await this.quietly(() => this.broadcasts.transitions.apply(scope, id, 'complete', SYSTEM));
      return null;
    }
    return { at: new Date(now.getTime() + TRACK_INTERVAL_MS) };
  }

  /**
   * Hands over the next page once the account's slots (and its sender domain's) have come: the
   * page's i-th recipient is due at now + i × the stricter spacing. Pages are at most a second of
   * the rate, and the next is handed over only once the last slot has come, so no message is due
   * more than a second ahead (what a pause cannot hold back any more). The step after a page is
   * the broadcast's next turn (pageSlots: once the others sharing the rate had theirs).
   */
  private async handOver(scope: EnvScope, row: BroadcastRow, token: string, now: Date): Promise<HandOver> {
    const reservation = await this.pacing.reserve(row, now);
    if ('waitUntil' in reservation) return { kind: 'wait', at: reservation.waitUntil };
    const page = await new RecipientDeliveryRepository(this.deps.db).toSend(scope, row.id, row.send_cursor, reservation.plan.size);
    if (page.length === 0) return { kind: 'drained' };
    const account = await new AccountsRepository(this.deps.db).find(scope.accountId);
    if (!account) return { kind: 'drained' };
    const slots = pageSlots(reservation.plan, page.length, reservation.sharers, now.getTime());
    const nowIso = now.toISOString();
    const units = page.map((r, i) => this.unit(row, r, slots.dueAt(i), nowIso, { cycleStart: currentCycleStart(account.anniversary_date, now), cap: account.messages_cap }));
    try {
      return await this.deps.db.transaction().execute(async (trx) => {
        const broadcasts = new BroadcastsRepository(trx);
        if (!(await broadcasts.advanceSend(scope, row.id, token, row.send_cursor, page[page.length - 1].seq, nowIso))) throw new Raced();
        if (!(await this.pacing.take(trx, reservation, slots))) throw new Raced();
        const outcomes = await this.intake.acceptWithin(trx, units);
        const recipients = new RecipientDeliveryRepository(trx);
        const handed: { seq: number; trackingId: string; dueAt: string }[] = [];
        let capped = false;
        for (let i = 0; i < page.length && !capped; i++) {
          const outcome = outcomes[i];
          const { seq } = page[i];
          if (outcome.ok && outcome.value === 'cap') {
            // The account's messagesCap is reached: the rest stays pending for after a resume.
            await broadcasts.setSendCursor(scope, row.id, seq - 1);
            capped = true;
          } else if (outcome.ok) handed.push({ seq, trackingId: units[i].message.tracking_id, dueAt: units[i].job.runAt!.toISOString() });
          // Refused alone (a recipient the intake could not merge): failed, not retried.
          else await recipients.set(scope, row.id, seq, { state: 'failed', failed_at: nowIso, updated_at: nowIso });
        }
        await recipients.handedOver(scope, row.id, handed, nowIso);
        return capped ? ({ kind: 'cap' } as const) : ({ kind: 'handed', at: slots.next } as const);
      });
    } catch (err) {
      if (err instanceof Raced) return { kind: 'raced', at: now };
      throw err;
    }
  }

  /** One recipient's message: the broadcast's content and sender, to the user (merge tags render with them). */
  private unit(row: BroadcastRow, r: Pick<RecipientRow, 'user_id'>, dueAt: Date, now: string, usage: IntakeUnit['usage']): IntakeUnit {
    const trackingId = this.deps.ids.uuid();
    const body: SendBody = {
      type: row.notification_id!,
      to: { id: r.user_id },
      forceChannels: ['EMAIL'],
      email: { subject: row.subject, html: row.html, senderName: row.from_name, senderEmail: row.from_address },
      options: { email: { fromAddress: row.from_address, fromName: row.from_name, ...(row.reply_to_address ? { replyToAddresses: [row.reply_to_address] } : {}) } },
    };
    return {
      accountId: row.account_id,
      envId: row.env_id,
      now,
      idempotency: null,
      usage,
      recipient: parseRecipient({ id: r.user_id }),
      ensureType: row.notification_id,
      job: { name: PROCESS_MESSAGE_JOB, data: { trackingId }, runAt: dueAt },
      message: internalMessageRow({
        tracking_id: trackingId,
        account_id: row.account_id,
        env_id: row.env_id,
        notification_id: row.notification_id!,
        user_id: r.user_id,
        request: JSON.stringify(body),
        received_at: now,
      }),
    };
  }

  /** A transition made moot by another operation (a pause, a cancel) is dropped. */
  private async quietly(apply: () => Promise<unknown>): Promise<void> {
    try {
      await apply();
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'CONFLICT')) throw err;
      this.deps.logger.debug({ err }, 'broadcast transition made moot by another operation');
    }
  }
}
