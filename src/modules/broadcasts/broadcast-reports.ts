import type { Deps } from '../../deps.js';
import { invalid } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { INTEGER_COLUMN_MAX } from '../../storage/schema.js';
import { notFoundBroadcast } from './broadcast-transitions.js';
import type { RecipientTracking } from './recipient-tracking.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import type { RecipientRow, RecipientState, SkipReason } from './broadcasts.tables.js';
import { type RecipientCounts, RecipientsRepository } from './recipients.repository.js';

export interface BroadcastMetrics {
  broadcastId: string;
  status: string;
  /** Recipient rows of the frozen audience so far. */
  total: number;
  counts: Omit<RecipientCounts, 'total' | 'skippedBy'>;
  /** Skipped recipients by why. */
  skipped: Partial<Record<SkipReason, number>>;
  /** Shares in [0, 1]: delivered of sent; opened, clicked and unsubscribed of delivered; bounced and failed of attempted (sent, failed or bounced). */
  rates: { delivery: number; open: number; click: number; bounce: number; failure: number; unsubscribe: number };
}

export interface RecipientView {
  userId: string;
  email?: string;
  state: RecipientState;
  skipReason?: SkipReason;
  trackingId?: string;
  sentAt?: string;
  deliveredAt?: string;
  failedAt?: string;
  bouncedAt?: string;
  openedAt?: string;
  clickedAt?: string;
  unsubscribedAt?: string;
  updatedAt: string;
}

const RECIPIENTS_LIMIT_DEFAULT = 100;

/** GET .../metrics and GET .../recipients: reads of a broadcast's recipient rows. */
export class BroadcastReports {
  constructor(
    private readonly deps: Pick<Deps, 'db'>,
    /** Brings recipients up to date with their deliveries before they are read (opens, clicks and unsubscribes come late). */
    private readonly tracking: Pick<RecipientTracking, 'sync'>,
  ) {}

  async metrics(scope: EnvScope, id: string): Promise<BroadcastMetrics> {
    const row = await new BroadcastsRepository(this.deps.db).find(scope, id);
    if (!row) throw notFoundBroadcast(id);
    await this.tracking.sync(scope, id);
    const { total, skippedBy, ...counts } = await new RecipientsRepository(this.deps.db).counts(scope, id);
    const share = (part: number, whole: number) => (whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 10_000);
    // A bounced or failed recipient was attempted but never sent.
    const attempted = counts.sent + counts.failed + counts.bounced;
    return {
      broadcastId: id,
      status: row.status,
      total,
      counts,
      skipped: skippedBy,
      rates: {
        delivery: share(counts.delivered, counts.sent),
        open: share(counts.opened, counts.delivered),
        click: share(counts.clicked, counts.delivered),
        bounce: share(counts.bounced, attempted),
        failure: share(counts.failed, attempted),
        unsubscribe: share(counts.unsubscribed, counts.delivered),
      },
    };
  }

  async recipients(scope: EnvScope, id: string, query: { state?: RecipientState; cursor?: string; limit?: number }): Promise<{ recipients: RecipientView[]; nextCursor?: string }> {
    if (!(await new BroadcastsRepository(this.deps.db).find(scope, id))) throw notFoundBroadcast(id);
    await this.tracking.sync(scope, id);
    let after: number | undefined;
    if (query.cursor !== undefined) {
      after = Number(query.cursor);
      if (!/^\d{1,10}$/.test(query.cursor) || after > INTEGER_COLUMN_MAX) throw invalid('cursor is not a cursor of this list.', 'Pass the nextCursor of the previous page unchanged.');
    }
    const limit = query.limit ?? RECIPIENTS_LIMIT_DEFAULT;
    const rows = await new RecipientsRepository(this.deps.db).list(scope, id, { state: query.state, after, limit: limit + 1 });
    const page = rows.slice(0, limit);
    return { recipients: page.map(recipientView), ...(rows.length > limit ? { nextCursor: String(page[page.length - 1].seq) } : {}) };
  }
}

function recipientView(row: RecipientRow): RecipientView {
  const view: RecipientView = { userId: row.user_id, state: row.state, updatedAt: row.updated_at };
  if (row.email !== null) view.email = row.email;
  if (row.skip_reason !== null) view.skipReason = row.skip_reason;
  if (row.tracking_id !== null) view.trackingId = row.tracking_id;
  const times = { sentAt: row.sent_at, deliveredAt: row.delivered_at, failedAt: row.failed_at, bouncedAt: row.bounced_at, openedAt: row.opened_at, clickedAt: row.clicked_at, unsubscribedAt: row.unsubscribed_at };
  for (const [key, value] of Object.entries(times)) if (value !== null) view[key as 'sentAt'] = value;
  return view;
}
