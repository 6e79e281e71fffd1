import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { stringify as stableStringify } from 'safe-stable-stringify';
import type { Deps } from '../../deps.js';
import { AppError, invalid, notFound } from '../../errors.js';
import type { Queue } from '../../queue/port.js';
import { type AccountRow, AccountsRepository } from '../accounts/accounts.repository.js';
import { currentCycleStart } from '../accounts/billing-cycle.js';
import { validateInlineAttachments } from '../../channels/email/attachments.js';
import { validateEmailAddressOptions } from '../../channels/email/recipients.js';
import { validateCustomData } from '../../channels/push/custom-data.js';
import type { DomainsService } from '../domains/domains.service.js';
import type { NumbersService } from '../telephony/numbers.service.js';
import { parseRecipient } from '../users/users.service.js';
import { TemplatesRepository } from '../templates/templates.repository.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import { MessagesRepository, PROCESS_MESSAGE_JOB } from './messages.repository.js';
import { Batcher } from '../../storage/batcher.js';
import { WorkTime } from '../../load.js';
import { acceptedMessageRow } from './message-rows.js';
import { type SendBody, type SendResponse, parametersOf } from './sending.schemas.js';
import { checkContent, noChannelMessage } from './send-warnings.js';
import { type IntakeResult, type IntakeUnit, SendIntake } from './intake.js';
import type { MessageRow } from './sending.tables.js';

const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000;
const CACHE_MS = 5000;
const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 3600 * 1000;

export interface SendContext {
  accountId: string;
  envId: string;
  idempotencyKey?: string;
  ip?: string;
  agent?: string;
}

/** The send request once aliases (notificationId, user, mergeTags, secondaryId) are folded in. */
export interface NormalizedSend {
  type: string;
  to: Record<string, unknown>;
  parameters: Record<string, unknown>;
  subNotificationId?: string;
  body: SendBody;
}

export function normalizeSend(body: SendBody): NormalizedSend {
  const type = body.type ?? body.notificationId;
  if (!type) throw invalid('type is required: the notification type id of this send.', 'Add "type": "order_shipped" (created automatically when new).');
  const to = body.to ?? body.user;
  if (!to) throw invalid('to is required: the recipient user.', 'Add "to": {"id": "user-1", "email": "..."}.');
  return {
    type,
    to,
    parameters: parametersOf(body),
    subNotificationId: body.subNotificationId ?? body.secondaryId,
    body,
  };
}

/**
 * An update of a scheduled send may repeat its type and recipient (the SDK's updateSchedule sends
 * a whole send body) but not change them: both were applied when the send was accepted (the
 * type created, the recipient's fields written to the user, the message filed under them), so a
 * new value would be stored in the request and never used.
 */
function refuseIdentityChange(message: MessageRow, stored: SendBody, update: SendBody): void {
  const type = update.type ?? update.notificationId;
  if (type !== undefined && type !== message.notification_id) {
    throw invalid(`type cannot change on a scheduled send: it is "${message.notification_id}".`, 'Cancel the send (DELETE /sender/scheduler/{trackingId}) and send again with the new type.');
  }
  const to = update.to ?? update.user;
  if (to !== undefined && !isDeepStrictEqual(to, stored.to ?? stored.user)) {
    throw invalid(
      'to cannot change on a scheduled send: the recipient was applied when the send was accepted.',
      "Repeat the send's to unchanged or leave it out; to send to someone else, cancel the send and send again; to change the user's fields, identify them (POST /users/{userId}).",
    );
  }
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The hash an Idempotency-Key holds: of the body's canonical JSON (keys sorted, by
 * safe-stable-stringify), so that a retry whose client rebuilt the object in another key order
 * is the same request, not a 409. Keys stored before hashed the body as sent: replay compares
 * with that too for the key's window.
 */
function idempotencyHash(body: SendBody): string {
  return sha256(stableStringify(body) ?? '');
}

/** A field and its older names: at most one of them per send, else one would be dropped unread. */
const ALIASES = [
  ['type', 'notificationId'],
  ['to', 'user'],
  ['parameters', 'mergeTags', 'replace'],
  ['subNotificationId', 'secondaryId'],
] as const satisfies readonly (readonly (keyof SendBody)[])[];

/** A few property reads per send; the arrays are only built for the error. */
export function refuseAliasConflicts(body: SendBody): void {
  for (const names of ALIASES) {
    let count = 0;
    for (const name of names) if (body[name] !== undefined) count++;
    if (count > 1) {
      const given = names.filter((name) => body[name] !== undefined);
      throw invalid(`${given.join(' and ')} are names of the same field: give one.`, `Send only ${names[0]} (${names.slice(1).join(', ')}: older names of it).`);
    }
  }
}

/** ISO 8601 date-time; a past time means now (null), more than a year ahead is refused. */
export function parseSchedule(schedule: string | undefined, now: Date): Date | null {
  if (schedule === undefined || schedule === '') return null;
  const at = /^\d{4}-\d{2}-\d{2}/.test(schedule) ? new Date(schedule) : new Date(Number.NaN);
  if (Number.isNaN(at.getTime())) {
    throw invalid(`schedule "${schedule}" is not an ISO 8601 date-time.`, 'Use e.g. "2026-12-01T09:00:00Z".');
  }
  if (at.getTime() - now.getTime() > MAX_SCHEDULE_AHEAD_MS) throw invalid('schedule is more than one year ahead.', 'Schedule within the next 12 months.');
  return at.getTime() <= now.getTime() ? null : at;
}

/**
 * Group commits of the intake, per engine: batches of up to 64 sends, one written at a time on
 * SQLite (one writer). On PostgreSQL a second batch is written beside the one under way once 8
 * sends wait for it: a batch is a few round trips, each of which waits on the other process (and
 * on a busy host on the scheduler), so one batch at a time left both CPUs partly idle; the second
 * overlaps the first but for the counter row, which it waits on from its count to the first's
 * commit. Not as separate lanes each starting a batch whenever idle: those committed batches of
 * 1 to 8 sends, each paying a whole batch's round trips (measured, issue 11, 50 connections,
 * same-run ratios to the raw route on a loaded host: one at a time 34-56%, one process and API
 * alone; a second from 8 waiting 70-84%, a third 73-80% at more CPU per send; lanes: 4 of 32
 * about 1,900 sends/s at 240 µs of CPU each against 2,500-4,000 at 100-120 µs for one).
 */
const INTAKE = {
  sqlite: { maxBatch: 64, overlap: undefined },
  postgres: { maxBatch: 64, overlap: { writers: 2, minUnits: 8 } },
} as const;

/** Times a send whose Idempotency-Key was let go by a refused request goes again before a 409. */
const MAX_RESUBMITS = 3;

export class SendingService {
  private readonly batcher: Batcher<IntakeUnit, IntakeResult>;
  private readonly accounts = new Map<string, { row: AccountRow; until: number; cycle?: { day: number; start: string } }>();
  private isoMs = Number.NaN;
  private iso = '';
  /** Environment id -> notification type -> until when it is known to exist (ms). */
  private readonly knownTypes = new Map<string, Map<string, number>>();
  constructor(
    private readonly deps: Deps,
    private readonly queue: Queue,
    /** The fromAddress rule (modules/domains); without it, senders are checked at delivery only. */
    private readonly domains?: Pick<DomainsService, 'checkFromAddress'>,
    /** The sms.from rule (modules/telephony): a number of the account. */
    private readonly numbers?: Pick<NumbersService, 'checkSender'>,
  ) {
    const intake = new SendIntake(deps, queue);
    const { maxBatch, overlap } = INTAKE[deps.storage.dialect];
    let write = (units: IntakeUnit[]) => intake.accept(units);
    if (deps.storage.dialect === 'postgres') {
      // Requests wait on the database, not the event loop: the workers of this process give way
      // while the group commits keep it at work (ApiLoad).
      const work = new WorkTime();
      deps.load.measureBackend(work.meter);
      write = async (units) => {
        work.begin();
        try {
          return await intake.accept(units);
        } finally {
          work.end();
        }
      };
    }
    this.batcher = new Batcher<IntakeUnit, IntakeResult>(write, maxBatch, overlap);
  }

  /** Accepts a send: answered only once the message and its job are committed together. */
  async accept(ctx: SendContext, body: SendBody): Promise<SendResponse> {
    refuseAliasConflicts(body);
    const send = normalizeSend(body);
    const now = this.deps.clock.now();
    const runAt = parseSchedule(body.schedule, now);
    validateInlineAttachments(body.options?.email?.attachments ?? []);
    validateEmailAddressOptions(body.options?.email);
    validateCustomData(body.options?.push?.customData);
    await this.checkSenders(ctx.accountId, body);

    const recipient = parseRecipient(send.to);

    const request = JSON.stringify(body);
    const requestHash = ctx.idempotencyKey ? idempotencyHash(body) : undefined;
    if (ctx.idempotencyKey) {
      const replay = await this.replay(ctx.envId, ctx.idempotencyKey, requestHash!, now, request);
      if (replay) return replay;
    }

    const account = await this.account(ctx.accountId, now);
    const cycle = this.cycleStart(ctx.accountId, account, now);

    const content = checkContent(body);
    const messages = content.messages;
    if (body.templateId && !(await this.templateExists(ctx, send.type, body.templateId))) {
      messages.push(`templateId "${body.templateId}" was not found for "${send.type}"; the default template of each channel is used.`);
    }
    if (content.templatesFor) {
      // No inline content on a usable channel: only then a read, for the type's templates.
      const templated = await new TemplatesRepository(this.deps.db).channelsWithTemplates(ctx.accountId, ctx.envId, send.type);
      if (!content.templatesFor.some((channel) => templated.has(channel))) {
        messages.push(noChannelMessage(send.type, content.templatesFor, Boolean(body.forceChannels?.length)));
      }
    }

    const trackingId = this.deps.ids.uuid();
    const response: SendResponse = { trackingId, messages };
    const receivedAt = this.isoTime(now);
    const typeKnown = (this.knownTypes.get(ctx.envId)?.get(send.type) ?? 0) > now.getTime();
    const unit: IntakeUnit = {
      accountId: ctx.accountId,
      envId: ctx.envId,
      now: receivedAt,
      idempotency: ctx.idempotencyKey
        ? {
            env_id: ctx.envId,
            key: ctx.idempotencyKey,
            request_hash: requestHash!,
            tracking_id: trackingId,
            response: JSON.stringify(response),
            created_at: receivedAt,
          }
        : null,
      usage: { cycleStart: cycle, cap: account.messages_cap },
      recipient,
      ensureType: typeKnown ? null : send.type,
      job: { name: PROCESS_MESSAGE_JOB, data: { trackingId }, runAt },
      message: acceptedMessageRow({
        tracking_id: trackingId,
        account_id: ctx.accountId,
        env_id: ctx.envId,
        notification_id: send.type,
        user_id: recipient.userId,
        template_id: body.templateId ?? null,
        sub_notification_id: send.subNotificationId ?? null,
        request,
        state: runAt ? 'scheduled' : 'queued',
        ip: ctx.ip ?? null,
        agent: ctx.agent ?? null,
        received_at: receivedAt,
        scheduled_for: runAt?.toISOString() ?? null,
      }),
    };
    let outcome = await this.batcher.submit(unit);
    for (let resubmitted = 0; outcome === 'replay'; resubmitted++) {
      const replay = await this.replay(ctx.envId, ctx.idempotencyKey!, requestHash!, now, request);
      if (replay) return replay;
      if (resubmitted === MAX_RESUBMITS) throw new AppError('CONFLICT', 'This Idempotency-Key is being used by a send that did not complete.', 'Retry the request.');
      // The request that held the key was refused (a 400 or 402 is not remembered) and let it go:
      // this one goes again and gets its own answer, as if it had come first.
      outcome = await this.batcher.submit(unit);
    }
    if (outcome === 'cap') {
      throw new AppError(
        'USAGE_LIMIT_EXCEEDED',
        `The account has used its ${account.messages_cap} messages for the billing cycle that started ${cycle}.`,
        'Wait for the next cycle, or raise messagesCap (CLARION_DEFAULT_MESSAGES_CAP for new accounts).',
      );
    }
    if (!typeKnown) this.rememberType(ctx.envId, send.type, now.getTime() + CACHE_MS);
    return response;
  }

  /**
   * A sender the request names (options.email.fromAddress, inline email.senderEmail) must be the
   * platform default sender or on a verified domain of the account: refused here with 400 rather
   * than accepted to fail at delivery. One read, only for sends that name a sender; a template's
   * senderEmail is checked at delivery (UNVERIFIED_SENDER). An `sms.from` must be a number of the
   * account (the spec's rule), also refused here.
   */
  private async checkSenders(accountId: string, body: SendBody): Promise<void> {
    const fromAddress = body.options?.email?.fromAddress;
    const senderEmail = typeof body.email?.senderEmail === 'string' ? body.email.senderEmail : undefined;
    if (this.domains && fromAddress !== undefined) await this.domains.checkFromAddress(accountId, fromAddress, 'options.email.fromAddress');
    else if (this.domains && senderEmail !== undefined) await this.domains.checkFromAddress(accountId, senderEmail, 'email.senderEmail');
    if (this.numbers && body.sms?.from !== undefined) await this.numbers.checkSender(accountId, body.sms.from);
  }

  /** Changes the body and/or time of a scheduled send that has not run yet. */
  async updateSchedule(ctx: SendContext, trackingId: string, body: SendBody): Promise<void> {
    refuseAliasConflicts(body);
    const message = await this.scheduled(ctx, trackingId);
    const now = this.deps.clock.now();
    normalizeSend({ ...body, type: body.type ?? body.notificationId ?? message.notification_id, to: body.to ?? body.user ?? { id: message.user_id } });
    const runAt = parseSchedule(body.schedule ?? message.scheduled_for ?? undefined, now) ?? now;
    validateInlineAttachments(body.options?.email?.attachments ?? []);
    validateEmailAddressOptions(body.options?.email);
    validateCustomData(body.options?.push?.customData);
    await this.checkSenders(ctx.accountId, body);
    const stored = JSON.parse(message.request) as SendBody;
    refuseIdentityChange(message, stored, body);
    const merged: SendBody = { ...stored, ...body };
    await this.deps.ledger.transaction(async (tx) => {
      const moved = message.job_id ? await this.queue.reschedule(tx.db, message.job_id, runAt, { trackingId }) : null;
      if (!moved) throw new AppError('CONFLICT', 'This send is already being delivered; its schedule can no longer change.');
      const ok = await tx.reschedule(
        trackingId,
        {
          request: JSON.stringify(merged),
          job_id: typeof moved === 'string' ? moved : message.job_id,
          scheduled_for: runAt.toISOString(),
          schedule_updated_to: runAt.toISOString(),
        },
        now.toISOString(),
      );
      if (!ok) throw new AppError('CONFLICT', 'This send is no longer scheduled.');
    });
  }

  async cancelSchedule(ctx: SendContext, trackingId: string): Promise<void> {
    const message = await this.scheduled(ctx, trackingId);
    await this.deps.ledger.transaction(async (tx) => {
      const canceled = message.job_id ? await this.queue.cancel(tx.db, message.job_id) : false;
      if (!canceled) throw new AppError('CONFLICT', 'This send is already being delivered and cannot be canceled.');
      await tx.cancelScheduled(trackingId, this.deps.clock.now().toISOString());
    });
  }

  private async scheduled(ctx: SendContext, trackingId: string): Promise<MessageRow> {
    // A send not yet processed is found too, as queued (not scheduled: 409).
    const message = (await new MessagesRepository(this.deps.db).messagesByIds(ctx.accountId, [trackingId])).find((m) => m.env_id === ctx.envId);
    if (!message) throw notFound('Scheduled send', trackingId);
    if (message.state !== 'scheduled') {
      throw new AppError('CONFLICT', `This send is ${message.state}, not scheduled.`, 'Only sends with a future schedule can be changed or canceled.');
    }
    return message;
  }

  /**
   * now.toISOString(), once per millisecond: sends accepted together share their time, and the
   * conversion was a measurable share of the request.
   */
  private isoTime(now: Date): string {
    const ms = now.getTime();
    if (ms !== this.isoMs) {
      this.isoMs = ms;
      this.iso = now.toISOString();
    }
    return this.iso;
  }

  private rememberType(envId: string, type: string, until: number): void {
    let types = this.knownTypes.get(envId);
    if (!types || types.size > 10_000) {
      if (this.knownTypes.size > 10_000) this.knownTypes.clear();
      types = new Map();
      this.knownTypes.set(envId, types);
    }
    types.set(type, until);
  }

  /** currentCycleStart, computed once per cached account and UTC day (a cycle turns only at midnight UTC). */
  private cycleStart(accountId: string, account: AccountRow, now: Date): string {
    const day = Math.floor(now.getTime() / 86_400_000);
    const cached = this.accounts.get(accountId);
    if (cached?.row === account && cached.cycle?.day === day) return cached.cycle.start;
    const start = currentCycleStart(account.anniversary_date, now);
    if (cached?.row === account) cached.cycle = { day, start };
    return start;
  }

  /**
   * The account's cap and anniversary, cached for a few seconds: read on every send, changed
   * almost never (the counter itself is always exact: it lives in usage_counters).
   */
  private async account(accountId: string, now: Date): Promise<AccountRow> {
    const cached = this.accounts.get(accountId);
    if (cached && cached.until > now.getTime()) return cached.row;
    const row = await new AccountsRepository(this.deps.db).find(accountId);
    if (!row) throw new AppError('UNAUTHORIZED', 'The account of these credentials no longer exists.');
    this.accounts.set(accountId, { row, until: now.getTime() + CACHE_MS });
    return row;
  }

  /** `request`: the body as sent, whose hash a key stored by an earlier version holds (see idempotencyHash). */
  private async replay(envId: string, key: string, requestHash: string, now: Date, request: string): Promise<SendResponse | null> {
    const repo = new IdempotencyRepository(this.deps.db);
    const previous = await repo.find(envId, key);
    if (!previous) return null;
    if (now.getTime() - new Date(previous.created_at).getTime() > IDEMPOTENCY_WINDOW_MS) {
      // Expired: the key may be used again; the purge job removes it eventually.
      await repo.purgeBefore(new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS).toISOString());
      return null;
    }
    if (previous.request_hash !== requestHash && previous.request_hash !== sha256(request)) {
      throw new AppError('IDEMPOTENCY_CONFLICT', 'This Idempotency-Key was used with a different request body.', 'Use a new key for a different send.');
    }
    return JSON.parse(previous.response) as SendResponse;
  }

  private async templateExists(ctx: SendContext, notificationId: string, templateId: string): Promise<boolean> {
    return new TemplatesRepository(this.deps.db).anyWithId(ctx.accountId, ctx.envId, notificationId, templateId);
  }
}
