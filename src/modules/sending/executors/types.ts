import type { Kysely } from 'kysely';
import type { DeliveryResult } from '../../../channels/types.js';
import type { CoreTables } from '../../../storage/schema.js';
import type { NotificationType } from '../../types/types.service.js';
import type { SendChannel } from '../channels.js';
import type { SendBody } from '../sending.schemas.js';
import type { AttemptRow, DeliveryRow, MessageRow } from '../sending.tables.js';

/** What a channel needs to deliver one rendered content to one user. */
export interface DeliverInput {
  delivery: DeliveryRow;
  message: MessageRow;
  /** Rendered content as stored on the delivery (the same on every retry). */
  content: Record<string, unknown>;
  body: SendBody;
  /**
   * This delivery's earlier attempts, by number (read when asked: only a retry has any). A
   * provider without idempotency keys (Twilio, Slack) reads them to learn whether an earlier
   * attempt may have been made without its answer reaching us. The one place that also says so
   * of a run that left no row (its worker died mid-call, or its record failed): it is listed
   * last, as an attempt that is not stored, with outcome 'retry', provider_code UNRECORDED_RUN
   * and, as its start, one no later than that run's (unrecorded-runs.ts). So a first attempt may
   * have one too: look at what this answers, not at delivery.attempts.
   */
  earlierAttempts?: () => Promise<AttemptRow[]>;
}

export interface DeliverOutcome {
  result: DeliveryResult;
  /** The channel confirms receipt itself (in-app: stored in the user's inbox). */
  delivered?: boolean;
  /** Channel-specific log fields, e.g. email_sent_message_id. */
  extra?: Record<string, unknown>;
}

/**
 * Lookups shared by the deliveries of one batch of jobs (an environment's email provider, say):
 * `once` loads a key the first time the batch asks and answers the same promise after that.
 */
export interface BatchScope {
  once<T>(key: string, load: () => Promise<T>): Promise<T>;
}

/** What planning knows of a send when it stores a delivery's content (see ChannelExecutor.planned). */
export interface PlanningSource {
  message: MessageRow;
  /** The content before rendering (a template's or the send's inline content). */
  source: Record<string, unknown>;
  type: NotificationType;
  parameters: Record<string, unknown>;
  user: Record<string, unknown>;
}

export interface ChannelExecutor {
  /** Maps inline content of the send body to the channel's template-shaped content. */
  fromInline(body: SendBody): Record<string, unknown> | null;
  preview(content: Record<string, unknown>): string;
  /**
   * The content a delivery stores, from the rendered content, when the channel needs more than
   * the rendering (in-app batching: the batch it goes into and its unrendered batch copy).
   * Decided once, at planning, so every run of the delivery does the same. May throw
   * TemplateRenderError (the delivery then fails as its rendering would have).
   */
  planned?(rendered: Record<string, unknown>, planning: PlanningSource): Record<string, unknown>;
  /** `scope`: the batch this delivery is run in, when it is run in one. */
  deliver(input: DeliverInput, scope?: BatchScope): Promise<DeliverOutcome>;
  /**
   * For channels whose delivery is a write to this same database (in-app): delivers inside the
   * messages' processing transaction instead of in a job of its own, so such a message costs one
   * transaction instead of three, and a batch of them a few statements. Answers an outcome per
   * input, in order; throws (nothing of the call kept once its savepoint is rolled back) when any
   * fails. `afterCommit` runs once that transaction has committed (the websocket push); if the
   * process dies before it, clients see the notification on their next fetch.
   */
  deliverInTransaction?(trx: Kysely<CoreTables>, inputs: DeliverInput[]): Promise<InTransactionOutcome[]>;
}

/** A delivery made inside the processing transaction, and what to do once that has committed. */
export type InTransactionOutcome = DeliverOutcome & { afterCommit?: () => Promise<void> };

/** A string field of rendered content, or undefined. */
export const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** An executor that holds connections (pools, HTTP/2 sessions) to close at shutdown. */
export type ManagedExecutor = ChannelExecutor & { close?(): Promise<void> };

export type Executors = Partial<Record<SendChannel, ManagedExecutor>>;
