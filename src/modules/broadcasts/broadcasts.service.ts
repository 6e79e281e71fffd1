import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { idCursor } from '../../id-cursor.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import type { AuthContext } from '../auth/auth-context.js';
import type { DomainsService } from '../domains/domains.service.js';
import { TypesRepository } from '../types/types.repository.js';
import { autoCreatedTypeRow } from '../types/types.service.js';
import type { Audience } from './broadcast-input.js';
import { type BroadcastView, type CreateInput, DEFAULT_SENDER_MAX_RECIPIENTS, type UpdateInput, audienceOf, broadcastView, checkAddress, parseAudience } from './broadcast-input.js';
import type { PausedReason } from './broadcast-states.js';
import { BroadcastTransitions, SYSTEM, notFoundBroadcast } from './broadcast-transitions.js';
import type { BroadcastRow, BroadcastsTable } from './broadcasts.tables.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import { RecipientsRepository } from './recipients.repository.js';
import type { AudienceService } from './audience.service.js';
import type { BroadcastJobs } from './broadcasts.jobs.js';
import type { LiquidRenderer } from '../../rendering/liquid.js';
import { validateContent } from '../templates/template-fields.js';

/** The environment an operation acts in, and who asks (recorded with each transition). */
export interface BroadcastCaller extends EnvScope {
  actor: string;
}

/** The actor a transition records for an API caller: the key, the environment credentials or the token's subject. */
export function callerOf(auth: AuthContext, envId: string): BroadcastCaller {
  const actor = auth.via === 'apiKey' ? `apiKey:${auth.keyId ?? ''}` : auth.via === 'basic' ? `basic:${envId}` : `jwt:${auth.subject ?? ''}`;
  return { accountId: auth.accountId, envId, actor };
}

const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 3600 * 1000;
const LIST_LIMIT_DEFAULT = 20;

/**
 * Email broadcasts (docs/broadcasts.md): drafts and their changes, and every operation of the
 * state table (broadcast-states.ts) applied through BroadcastTransitions, with the rules that
 * guard schedule, send and resume. Starting a broadcast enqueues the freeze of its audience
 * (BroadcastSending), in the transaction that moves it to sending.
 */
export class BroadcastsService {
  readonly transitions: BroadcastTransitions;

  constructor(
    private readonly deps: Pick<Deps, 'db' | 'clock' | 'ids' | 'config'>,
    private readonly audience: Pick<AudienceService, 'size'>,
    private readonly domains: Pick<DomainsService, 'checkFromAddress'>,
    private readonly jobs: Pick<BroadcastJobs, 'enqueueFreeze' | 'enqueueStart'>,
    /** Checks the subject's and the html's Liquid as email templates' are checked. */
    private readonly renderer: LiquidRenderer,
  ) {
    this.transitions = new BroadcastTransitions(deps);
  }

  async create(caller: BroadcastCaller, input: CreateInput): Promise<BroadcastView> {
    const audience = parseAudience(input.audience);
    this.checkLiquid(input);
    if (input.internalTemplate !== undefined && input.html === '') {
      throw invalid('internalTemplate must be paired with html: html is empty.', 'Send the html the editor produced with its internalTemplate.');
    }
    const now = this.deps.clock.now().toISOString();
    const row: BroadcastsTable = {
      id: this.deps.ids.uuid(),
      account_id: caller.accountId,
      env_id: caller.envId,
      name: input.name,
      status: 'draft',
      paused_reason: null,
      notification_id: input.type ?? null,
      audience: JSON.stringify(audience),
      from_name: input.fromName,
      from_address: checkAddress(input.fromAddress, 'fromAddress'),
      reply_to_address: input.replyToAddress === undefined ? null : checkAddress(input.replyToAddress, 'replyToAddress'),
      subject: input.subject,
      html: input.html,
      internal_template: input.internalTemplate ?? null,
      schedule_at: null,
      archived_at: null,
      freeze_cursor: null,
      frozen_count: 0,
      audience_frozen_at: null,
      send_cursor: 0,
      send_token: null,
      send_step_at: null,
      send_restarts: 0,
      created_at: now,
      updated_at: now,
    };
    await this.deps.db.transaction().execute(async (trx) => {
      await new BroadcastsRepository(trx).insert(row);
      await this.transitions.created(trx, row, caller.actor);
      await this.ensureType(trx, caller, row.notification_id, now);
    });
    return broadcastView(row, true);
  }

  async get(scope: EnvScope, id: string): Promise<BroadcastView> {
    return broadcastView(await this.row(scope, id), true);
  }

  async list(scope: EnvScope, query: { cursor?: string; limit?: number; archived?: boolean }): Promise<{ broadcasts: BroadcastView[]; nextCursor?: string }> {
    const limit = query.limit ?? LIST_LIMIT_DEFAULT;
    const rows = await new BroadcastsRepository(this.deps.db).list(scope, { before: idCursor(query.cursor), limit: limit + 1, archived: query.archived === true });
    const page = rows.slice(0, limit);
    return { broadcasts: page.map((r) => broadcastView(r, false)), ...(rows.length > limit ? { nextCursor: page[page.length - 1].id } : {}) };
  }

  /** PATCH: drafts only; internalTemplate is settable only at creation. */
  async update(caller: BroadcastCaller, id: string, input: UpdateInput): Promise<BroadcastView> {
    if (input.internalTemplate !== undefined) {
      throw invalid('internalTemplate is settable only when the broadcast is created.', 'Create a new broadcast with the new internalTemplate and its html.');
    }
    const audience: Audience | undefined = input.audience === undefined ? undefined : parseAudience(input.audience);
    this.checkLiquid(input);
    const fromAddress = input.fromAddress === undefined ? undefined : checkAddress(input.fromAddress, 'fromAddress');
    const replyTo = input.replyToAddress == null ? input.replyToAddress : checkAddress(input.replyToAddress, 'replyToAddress');
    const row = await this.transitions.apply(caller, id, 'update', caller.actor, {
      patch: () => ({
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.type !== undefined ? { notification_id: input.type } : {}),
        ...(audience !== undefined ? { audience: JSON.stringify(audience) } : {}),
        ...(input.fromName !== undefined ? { from_name: input.fromName } : {}),
        ...(fromAddress !== undefined ? { from_address: fromAddress } : {}),
        ...(replyTo !== undefined ? { reply_to_address: replyTo } : {}),
        ...(input.subject !== undefined ? { subject: input.subject } : {}),
        ...(input.html !== undefined ? { html: input.html } : {}),
      }),
      within: (trx, changed, now) => this.ensureType(trx, caller, input.type ? changed.notification_id : null, now),
    });
    return broadcastView(row, true);
  }

  /**
   * The subject and the html are rendered for each recipient: Liquid that does not parse is
   * refused when it is written (as an email template's is), not found at the send, failing every
   * recipient. Components are resolved at the send (one may be added in between).
   */
  private checkLiquid(content: { subject?: string; html?: string }): void {
    validateContent(this.renderer, 'EMAIL', { subject: content.subject, html: content.html });
  }

  delete(caller: BroadcastCaller, id: string): Promise<void> {
    return this.transitions.delete(caller, id);
  }

  async schedule(caller: BroadcastCaller, id: string, sendAt: string): Promise<BroadcastView> {
    const at = new Date(sendAt);
    const now = this.deps.clock.now();
    if (Number.isNaN(at.getTime())) throw invalid(`sendAt "${sendAt}" is not an ISO 8601 date-time.`, 'Use e.g. "2026-12-01T09:00:00Z".');
    if (at.getTime() <= now.getTime()) throw invalid(`sendAt ${at.toISOString()} is not in the future (it is now ${now.toISOString()}).`, 'Pick a later time, or send now with POST /broadcasts/{broadcastId}/send.');
    if (at.getTime() - now.getTime() > MAX_SCHEDULE_AHEAD_MS) throw invalid('sendAt is more than one year ahead.', 'Schedule within the next 12 months.');
    const row = await this.transitions.apply(caller, id, 'schedule', caller.actor, {
      check: (r) => this.checkSendable(caller, r),
      patch: () => ({ schedule_at: at.toISOString() }),
      within: (trx) => this.jobs.enqueueStart(trx, at),
    });
    return broadcastView(row, true);
  }

  async send(caller: BroadcastCaller, id: string): Promise<BroadcastView> {
    const row = await this.transitions.apply(caller, id, 'send', caller.actor, {
      check: (r) => this.checkSendable(caller, r),
      within: (trx, changed) => this.jobs.enqueueFreeze(trx, changed),
    });
    return broadcastView(row, true);
  }

  async pause(caller: BroadcastCaller, id: string): Promise<BroadcastView> {
    return broadcastView(await this.transitions.apply(caller, id, 'pause', caller.actor, { pausedReason: 'PAUSED_BY_USER' }), true);
  }

  /** The service pauses a sending broadcast (the freeze, and delivery: plan cap, reputation guard). */
  pauseBySystem(scope: EnvScope, id: string, reason: Exclude<PausedReason, 'PAUSED_BY_USER'>): Promise<BroadcastRow> {
    return this.transitions.apply(scope, id, 'pause', SYSTEM, { pausedReason: reason });
  }

  /**
   * paused -> sending. What paused it must be over: a sender still unverified is refused
   * (UNVERIFIED_DOMAIN), a frozen audience over the limit cannot shrink (409).
   */
  async resume(caller: BroadcastCaller, id: string): Promise<BroadcastView> {
    const row = await this.transitions.apply(caller, id, 'resume', caller.actor, {
      check: async (r) => {
        if (r.paused_reason === 'AUDIENCE_LIMITS_EXCEEDED') {
          throw new AppError(
            'CONFLICT',
            `This broadcast is paused (AUDIENCE_LIMITS_EXCEEDED): its audience is over the ${DEFAULT_SENDER_MAX_RECIPIENTS} recipients the platform default sender allows, and a frozen audience does not change.`,
            'Cancel it (POST .../cancel) and send a new broadcast from an address on a verified domain.',
          );
        }
        await this.checkSender(caller, r.from_address);
      },
      // The freeze goes on where it stopped; on a frozen audience it completes the broadcast if no one is pending.
      within: (trx, changed) => this.jobs.enqueueFreeze(trx, changed),
    });
    return broadcastView(row, true);
  }

  /** scheduled -> draft (schedule dropped); sending or paused -> canceled (pending recipients skipped). */
  async cancel(caller: BroadcastCaller, id: string): Promise<BroadcastView> {
    const row = await this.transitions.apply(caller, id, 'cancel', caller.actor, {
      patch: (r) => (r.status === 'scheduled' ? { schedule_at: null } : {}),
      within: async (trx, changed, now) => {
        if (changed.status === 'canceled') await new RecipientsRepository(trx).skipPending(caller, id, 'CANCELED', now);
      },
    });
    return broadcastView(row, true);
  }

  async archive(caller: BroadcastCaller, id: string): Promise<BroadcastView> {
    return broadcastView(await this.transitions.apply(caller, id, 'archive', caller.actor, { patch: (_r, now) => ({ archived_at: now }) }), true);
  }

  async unarchive(caller: BroadcastCaller, id: string): Promise<BroadcastView> {
    return broadcastView(await this.transitions.apply(caller, id, 'unarchive', caller.actor, { patch: () => ({ archived_at: null }) }), true);
  }

  async history(scope: EnvScope, id: string) {
    await this.row(scope, id);
    const rows = await new BroadcastsRepository(this.deps.db).transitions(scope, id);
    return rows.map((r) => ({ operation: r.operation, from: r.from_status, to: r.to_status, ...(r.paused_reason ? { pausedReason: r.paused_reason } : {}), actor: r.actor, at: r.at }));
  }

  async row(scope: EnvScope, id: string): Promise<BroadcastRow> {
    const row = await new BroadcastsRepository(this.deps.db).find(scope, id);
    if (!row) throw notFoundBroadcast(id);
    return row;
  }

  isDefaultSender(address: string): boolean {
    return address.trim().toLowerCase() === this.deps.config.defaultFromAddress.toLowerCase();
  }

  /** The fromAddress rule: the platform default sender or an address on a verified domain (400 UNVERIFIED_DOMAIN). */
  checkSender(scope: EnvScope, address: string): Promise<void> {
    return this.domains.checkFromAddress(scope.accountId, address, 'fromAddress', 'UNVERIFIED_DOMAIN');
  }

  /** What schedule and send require of a draft (spec: States and transitions; Limits). */
  private async checkSendable(scope: EnvScope, row: BroadcastRow): Promise<void> {
    if (row.subject.trim() === '') throw invalid('subject is empty: a broadcast is sent or scheduled with a subject.', 'Set one with PATCH /broadcasts/{broadcastId} {"subject": "..."}.');
    if (row.notification_id === null) throw invalid('type is not set: a broadcast is sent or scheduled with a notification type.', 'Set one with PATCH /broadcasts/{broadcastId} {"type": "newsletter"} (created when new).');
    await this.checkSender(scope, row.from_address);
    if (this.isDefaultSender(row.from_address)) {
      const size = await this.audience.size(scope, audienceOf(row));
      if (size > DEFAULT_SENDER_MAX_RECIPIENTS) {
        throw invalid(
          `The audience holds ${size} users; the platform default sender (${row.from_address}) is for testing and sends to at most ${DEFAULT_SENDER_MAX_RECIPIENTS}.`,
          'Send from an address on a verified domain (POST /domains), or narrow the audience.',
        );
      }
    }
  }

  private async ensureType(trx: Kysely<CoreTables>, scope: EnvScope, type: string | null, now: string): Promise<void> {
    if (type) await new TypesRepository(trx).insertManyIfMissing([autoCreatedTypeRow(scope.accountId, scope.envId, type, now)]);
  }
}
