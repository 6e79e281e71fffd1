import type { Deps } from '../../deps.js';
import { AppError } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { AccountsRepository } from '../accounts/accounts.repository.js';
import { currentCycleStart } from '../accounts/billing-cycle.js';
import type { IntakeUnit, SendIntake } from '../sending/intake.js';
import { internalMessageRow } from '../sending/message-rows.js';
import type { SendBody } from '../sending/sending.schemas.js';
import { PROCESS_MESSAGE_JOB } from '../sending/sending.service.js';
import { parseRecipient } from '../users/users.service.js';
import { SYSTEM } from './broadcast-transitions.js';
import type { BroadcastsService } from './broadcasts.service.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import type { BroadcastRow, RecipientRow } from './broadcasts.tables.js';
import { PacingRepository } from './pacing.repository.js';
import { RecipientDeliveryRepository } from './recipient-delivery.repository.js';
import type { RecipientTracking } from './recipient-tracking.js';
import type { ReputationGuard } from './reputation-guard.js';
import { RecipientsRepository } from './recipients.repository.js';

/** Most recipients handed over in one page (one transaction): at most a second of the rate. */
export const MAX_PAGE = 500;
/** The rate of the platform default sender (testing only: "heavily throttled"), messages per second. */
export const DEFAULT_SENDER_RATE = 5;
/** How often a broadcast whose recipients are all handed over looks again for the ones in flight. */
export const TRACK_INTERVAL_MS = 1000;

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
 * each, its own trackingId), paced by the account's rate; once every recipient is handed over,
 * follows the ones in flight (RecipientTracking) and completes the broadcast (sent) when none is
 * pending. A page is one transaction: the send cursor's move (guarded by the value read, the
 * status `sending` and the chain's token), the account's slots, the messages and their jobs
 * (due at their slot), and the recipients' trackingIds. So a run twice, a pause or a cancel at
 * any point, or a crash at any line hands nobody over twice.
 */
export class BroadcastDelivery {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'clock' | 'ids' | 'config' | 'logger'>,
    private readonly broadcasts: Pick<BroadcastsService, 'isDefaultSender' | 'pauseBySystem' | 'transitions'>,
    private readonly intake: Pick<SendIntake, 'acceptWithin'>,
    private readonly tracking: Pick<RecipientTracking, 'syncInFlight'>,
    private readonly guard: Pick<ReputationGuard, 'check'>,
  ) {}

  /** Messages per second of this broadcast's sender. */
  rateOf(row: Pick<BroadcastRow, 'from_address'>): number {
    const rate = this.deps.config.broadcastRate;
    return this.broadcasts.isDefaultSender(row.from_address) ? Math.min(rate, DEFAULT_SENDER_RATE) : rate;
  }

  /** One step of the chain `token`; null: the chain ends (not sending, another chain owns it, sent, paused). */
  async step(scope: EnvScope, id: string, token: string): Promise<NextStep | null> {
    const row = await new BroadcastsRepository(this.deps.db).find(scope, id);
    if (!row || row.status !== 'sending' || row.send_token !== token) return null;
    const now = this.deps.clock.now();
    if (row.send_cursor < row.frozen_count) {
      const why = await this.guard.check(scope, id);
      if (why) {
        this.deps.logger.warn({ broadcastId: id, envId: scope.envId, why }, 'broadcast paused by the reputation guard');
        await this.quietly(() => this.broadcasts.pauseBySystem(scope, id, 'REPUTATION_GUARD'));
        return null;
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
   * Hands over the next page when the account's slots have come (its first free slot is not in
   * the future): page i-th recipient due at slot + i / rate. Pages are at most a second of the
   * rate, and the next is handed over only once the account's last slot has come, so no message
   * is due more than a second ahead (what a pause cannot hold back any more).
   */
  private async handOver(scope: EnvScope, row: BroadcastRow, token: string, now: Date): Promise<HandOver> {
    const pacing = new PacingRepository(this.deps.db);
    const nextAt = await pacing.nextAt(scope.accountId);
    if (nextAt !== null && Date.parse(nextAt) > now.getTime()) return { kind: 'wait', at: new Date(nextAt) };
    const rate = this.rateOf(row);
    const page = await new RecipientDeliveryRepository(this.deps.db).toSend(scope, row.id, row.send_cursor, Math.max(1, Math.min(rate, MAX_PAGE)));
    if (page.length === 0) return { kind: 'drained' };
    const account = await new AccountsRepository(this.deps.db).find(scope.accountId);
    if (!account) return { kind: 'drained' };
    const interval = 1000 / rate;
    const nowIso = now.toISOString();
    const units = page.map((r, i) => this.unit(row, r, new Date(now.getTime() + Math.floor(i * interval)), nowIso, { cycleStart: currentCycleStart(account.anniversary_date, now), cap: account.messages_cap }));
    const end = new Date(now.getTime() + Math.ceil(page.length * interval));
    try {
      return await this.deps.db.transaction().execute(async (trx) => {
        const broadcasts = new BroadcastsRepository(trx);
        if (!(await broadcasts.advanceSend(scope, row.id, token, row.send_cursor, page[page.length - 1].seq, nowIso))) throw new Raced();
        if (!(await new PacingRepository(trx).take(scope.accountId, nextAt, end.toISOString()))) throw new Raced();
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
        return capped ? ({ kind: 'cap' } as const) : ({ kind: 'handed', at: end } as const);
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
