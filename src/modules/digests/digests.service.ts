import type { Deps } from '../../deps.js';
import { AccountsRepository } from '../accounts/accounts.repository.js';
import { currentCycleStart } from '../accounts/billing-cycle.js';
import type { LedgerSession } from '../delivery/ledger.js';
import { SEND_CHANNELS } from '../sending/channels.js';
import { internalMessageRow } from '../sending/message-rows.js';
import type { SendIntake } from '../sending/intake.js';
import type { SendBody } from '../sending/sending.schemas.js';
import { PROCESS_MESSAGE_JOB } from '../sending/messages.repository.js';
import type { DeliveryRow } from '../sending/sending.tables.js';
import { UsersRepository } from '../users/users.repository.js';
import { parseRecipient } from '../users/users.service.js';
import { digestParameters } from './digest-content.js';
import { type DigestSchedule, nextDigestDue } from './digest-schedule.js';
import { type DigestKey, DigestsRepository } from './digests.repository.js';
import type { DigestItemsTable, DigestRow } from './digests.tables.js';

/** A delivery routing collects into a digest instead of sending it now. */
export interface CollectedDelivery {
  /** The delivery row, status `digested`; collect() fills its log fields. */
  row: DeliveryRow;
  userId: string;
  notificationId: string;
  schedule: DigestSchedule;
  /** The user's zone (UTC when unknown). */
  zone: string;
}

/** The marker a digest's message carries in its stored request: routing checks it against the digests table. */
export interface DigestMarker {
  digest: { id: string };
}

/** Digests per run of the periodic job before it yields (the next run takes the rest). */
const DUE_BATCH = 100;
/**
 * A digest's message counts in the account's usage, but is not refused by messagesCap: its items
 * were accepted under the cap already, and an accepted send is never lost. (The counter is an
 * int4 on PostgreSQL, so "no cap" is a large int4.)
 */
const DIGEST_USAGE_CAP = 2_000_000_000;

/**
 * Digests (issue 13, item 3): a channel whose delivery option is hourly, daily, weekly or monthly
 * collects a user's messages of a type and sends one message per period at the chosen time in
 * the user's zone.
 *
 * - Collecting happens inside routing's ledger transaction (collect, addItems): the delivery is
 *   created `digested` and joins the user's open digest of that type and channel, opening one
 *   (due at the next chosen time) when there is none. Durable with the routing decision.
 * - Sending (sendDue, by the periodic job) claims a due digest and accepts its message through
 *   the send intake in one transaction, marking the items with the message's trackingId: a
 *   worker that dies before the commit leaves the digest open (the next run sends it), one that
 *   dies after leaves a normal message whose delivery the usual retries carry. The message is
 *   routed to the digest's channel only and rendered by the type's digest template (routing
 *   reads the marker, see DigestMarker).
 */
export class DigestsService {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'clock' | 'ids' | 'ledger' | 'logger'>,
    private readonly intake: Pick<SendIntake, 'acceptWithin'>,
  ) {}

  /**
   * Within routing's transaction, before the deliveries are inserted: gives each collected
   * delivery its digest (the user's open one, or a new one) and its log fields. Returns the item
   * rows for addItems, to write once the deliveries exist.
   */
  async collect(tx: LedgerSession, collected: CollectedDelivery[], now: string): Promise<DigestItemsTable[]> {
    const repo = new DigestsRepository(tx.db);
    const groups = new Map<string, CollectedDelivery[]>();
    for (const c of collected) {
      const key = `${c.row.env_id}\u0000${c.userId}\u0000${c.notificationId}\u0000${c.row.channel}`;
      groups.set(key, [...(groups.get(key) ?? []), c]);
    }
    const items: DigestItemsTable[] = [];
    for (const group of groups.values()) {
      const { row, userId, notificationId, schedule, zone } = group[0];
      const key: DigestKey = { accountId: row.account_id, envId: row.env_id, userId, notificationId, channel: row.channel };
      const digest = await this.openDigest(repo, key, group.length, schedule, zone, now);
      for (const c of group) {
        const ch = c.row.channel;
        c.row.extra = JSON.stringify({ [`${ch}_digest`]: digest.option, [`${ch}_digest_id`]: digest.id, [`${ch}_digested_at`]: now, [`${ch}_digest_due_at`]: digest.due_at });
        items.push({ digest_id: digest.id, delivery_id: c.row.id, tracking_id: c.row.tracking_id, account_id: c.row.account_id, env_id: c.row.env_id, created_at: now });
      }
    }
    return items;
  }

  /**
   * Writes the items collect() made, after their deliveries: in the run that moved the message to
   * processed, the only one that writes its deliveries, so they are all new.
   */
  async addItems(tx: LedgerSession, items: DigestItemsTable[]): Promise<void> {
    await new DigestsRepository(tx.db).insertItems(items);
  }

  /** Sends every digest due now; answers how many messages it made. */
  async sendDue(): Promise<number> {
    let sent = 0;
    for (;;) {
      const due = await new DigestsRepository(this.deps.db).due(this.deps.clock.now().toISOString(), DUE_BATCH);
      let claimed = 0;
      for (const digest of due) {
        try {
          if (await this.send(digest.id)) sent++;
          claimed++;
        } catch (err) {
          // Left open: the next run sends it. The others go on.
          this.deps.logger.warn({ err, digestId: digest.id, envId: digest.env_id }, 'sending a digest failed; it stays open and is retried');
        }
      }
      if (due.length < DUE_BATCH || claimed === 0) return sent;
    }
  }

  /**
   * Claims one due digest and, in the same transaction, accepts its message through the intake
   * and marks its items with that message's trackingId. False when there was nothing to send
   * (claimed elsewhere, not due, no items left, the recipient gone).
   */
  send(digestId: string): Promise<boolean> {
    const now = this.deps.clock.now();
    const at = now.toISOString();
    const trackingId = this.deps.ids.uuid();
    return this.deps.ledger.transaction(async (tx) => {
      const repo = new DigestsRepository(tx.db);
      const digest = await repo.claim(digestId, at, trackingId);
      if (!digest) return false;
      const rows = await repo.items(digest);
      if (rows.length === 0) {
        await repo.settle(digest, 'empty', null);
        return false;
      }
      const [user] = await new UsersRepository(tx.db).findMany(digest.account_id, digest.env_id, [digest.user_id]);
      const account = await new AccountsRepository(tx.db).find(digest.account_id);
      if (!user || !account) {
        await this.failItems(tx, repo, digest, rows.map((r) => r.delivery_id), at);
        return false;
      }
      const [outcome] = await this.intake.acceptWithin(tx.db, [this.unitOf(digest, trackingId, digestParameters(digest, rows), account.anniversary_date, now)]);
      if (!outcome.ok) throw outcome.error;
      const ch = digest.channel;
      for (const row of rows) await tx.mergeDeliveryDetails(row.delivery_id, { [`${ch}_digest_tracking_id`]: trackingId, [`${ch}_digest_sent_at`]: at }, at);
      return true;
    });
  }

  /** The send of a digest: to the digest's channel only, its items as parameters. */
  private unitOf(digest: DigestRow, trackingId: string, parameters: ReturnType<typeof digestParameters>, anniversary: string, now: Date): Parameters<SendIntake['acceptWithin']>[1][number] {
    const channel = SEND_CHANNELS.find((c) => c.log === digest.channel)!.channel;
    const body: SendBody & DigestMarker = { type: digest.notification_id, to: { id: digest.user_id }, forceChannels: [channel], parameters, digest: { id: digest.id } };
    const at = now.toISOString();
    return {
      accountId: digest.account_id,
      envId: digest.env_id,
      now: at,
      idempotency: null,
      usage: { cycleStart: currentCycleStart(anniversary, now), cap: DIGEST_USAGE_CAP },
      recipient: parseRecipient({ id: digest.user_id }),
      ensureType: null,
      job: { name: PROCESS_MESSAGE_JOB, data: { trackingId }, runAt: null },
      message: internalMessageRow({
        tracking_id: trackingId,
        account_id: digest.account_id,
        env_id: digest.env_id,
        notification_id: digest.notification_id,
        user_id: digest.user_id,
        request: JSON.stringify(body),
        received_at: at,
      }),
    };
  }

  /** The recipient (or account) was deleted before the digest was due: its items fail, the digest too. */
  private async failItems(tx: LedgerSession, repo: DigestsRepository, digest: DigestRow, deliveryIds: string[], at: string): Promise<void> {
    const code = 'USER_DELETED';
    await repo.settle(digest, 'failed', code);
    for (const id of deliveryIds) {
      await tx.transitionDelivery(id, 'failed', { at, code, patch: { failed_at: at, failed_code: code, failed_internal: 'the recipient was deleted before the digest was due' } });
    }
  }

  /** The user's open digest for `key`, counting `items` more into it; opened, due at the next chosen time, when there is none. */
  private async openDigest(repo: DigestsRepository, key: DigestKey, items: number, schedule: DigestSchedule, zone: string, now: string): Promise<Pick<DigestRow, 'id' | 'due_at' | 'option'>> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const open = await repo.joinOpen(key, items);
      if (open) return open;
      const digest = {
        id: this.deps.ids.uuid(),
        account_id: key.accountId,
        env_id: key.envId,
        user_id: key.userId,
        notification_id: key.notificationId,
        channel: key.channel,
        option: schedule.option,
        timezone: zone,
        state: 'open' as const,
        due_at: nextDigestDue(schedule, zone, new Date(now)).toISOString(),
        tracking_id: null,
        item_count: items,
        failed_code: null,
        created_at: now,
        sent_at: null,
      };
      if (await repo.open(digest)) return digest;
      // Another transaction opened it meanwhile: join that one.
    }
    throw new Error(`could not open or join the digest of user ${key.userId}, type ${key.notificationId}, channel ${key.channel}`);
  }
}
