/**
 * The life of a broadcast (spec: States and transitions, Broadcast status) as one table: for each
 * operation, the states it may start from and the state it leads to. The service applies an
 * operation only where this table has a row, as a conditional update on the current status (so
 * two concurrent operations cannot both apply); everything else is refused with 409 CONFLICT
 * naming the current state (refusal()).
 *
 * Rows the spec's table shows: create, schedule, send, and cancel from scheduled, sending and
 * paused. Rows the spec leaves "not shown", chosen here:
 * - start: a scheduled broadcast starts sending at its `scheduleAt` (the broadcasts.start-due job).
 * - pause / resume: sending <-> paused, by the user (PAUSED_BY_USER) or by the service
 *   (PLAN_EXCEEDED, REPUTATION_GUARD, AUDIENCE_LIMITS_EXCEEDED, UNVERIFIED_DOMAIN...).
 * - complete: sending -> sent once no recipient is pending.
 * - update and delete: drafts only (they keep the status, or remove the record).
 * - archive / unarchive keep the status: allowed in draft, paused, sent and canceled, refused in
 *   sending and scheduled (the spec's rule). An archived broadcast cannot be scheduled, sent or
 *   resumed (it would be archived while scheduled or sending): unarchive it first.
 */

export const BROADCAST_STATUSES = ['draft', 'scheduled', 'sending', 'sent', 'paused', 'canceled'] as const;
export type BroadcastStatus = (typeof BROADCAST_STATUSES)[number];

/** The "state" of a broadcast not created yet, and of one deleted. */
export const NEW = 'new' as const;
export const DELETED = 'deleted' as const;

export const PAUSED_REASONS = [
  'PAUSED_BY_USER',
  'REPUTATION_GUARD',
  'PLAN_EXCEEDED',
  'PENDING_VERIFICATION',
  'AUDIENCE_LIMITS_EXCEEDED',
  'UNVERIFIED_DOMAIN',
  'SPAM_CONTENT',
] as const;
export type PausedReason = (typeof PAUSED_REASONS)[number];

export type BroadcastOperation =
  | 'create'
  | 'update'
  | 'delete'
  | 'schedule'
  | 'send'
  | 'start'
  | 'pause'
  | 'resume'
  | 'cancel'
  | 'complete'
  | 'archive'
  | 'unarchive';

type Rows = Partial<Record<BroadcastStatus | typeof NEW, BroadcastStatus | typeof DELETED>>;

/** Operation -> (state it may start from -> state it leads to). Nothing else is allowed. */
export const BROADCAST_TRANSITIONS = {
  create: { new: 'draft' },
  update: { draft: 'draft' },
  delete: { draft: DELETED },
  schedule: { draft: 'scheduled' },
  send: { draft: 'sending' },
  start: { scheduled: 'sending' },
  pause: { sending: 'paused' },
  resume: { paused: 'sending' },
  cancel: { scheduled: 'draft', sending: 'canceled', paused: 'canceled' },
  complete: { sending: 'sent' },
  archive: { draft: 'draft', paused: 'paused', sent: 'sent', canceled: 'canceled' },
  unarchive: { draft: 'draft', paused: 'paused', sent: 'sent', canceled: 'canceled' },
} as const satisfies Record<BroadcastOperation, Rows>;

/** Who may apply an operation: the API caller, the service itself (jobs, delivery), or both. */
export const OPERATION_ACTORS: Record<BroadcastOperation, 'user' | 'system' | 'both'> = {
  create: 'user',
  update: 'user',
  delete: 'user',
  schedule: 'user',
  send: 'user',
  start: 'system',
  pause: 'both',
  resume: 'user',
  cancel: 'user',
  complete: 'system',
  archive: 'user',
  unarchive: 'user',
};

/** Operations refused while the broadcast is archived (they would leave it archived while scheduled or sending), and the one that needs it archived. */
export const REFUSED_WHILE_ARCHIVED: readonly BroadcastOperation[] = ['schedule', 'send', 'resume', 'archive'];
export const NEEDS_ARCHIVED: readonly BroadcastOperation[] = ['unarchive'];

/** The state `operation` leads to from `from`, or undefined when the table has no such row. */
export function nextStatus(operation: BroadcastOperation, from: BroadcastStatus | typeof NEW): BroadcastStatus | typeof DELETED | undefined {
  return (BROADCAST_TRANSITIONS[operation] as Rows)[from];
}

/** The states `operation` may start from. */
export function allowedFrom(operation: BroadcastOperation): BroadcastStatus[] {
  return (Object.keys(BROADCAST_TRANSITIONS[operation]) as (BroadcastStatus | typeof NEW)[]).filter((s): s is BroadcastStatus => s !== NEW);
}

const VERB: Record<BroadcastOperation, string> = {
  create: 'created',
  update: 'changed',
  delete: 'deleted',
  schedule: 'scheduled',
  send: 'sent',
  start: 'started',
  pause: 'paused',
  resume: 'resumed',
  cancel: 'canceled',
  complete: 'completed',
  archive: 'archived',
  unarchive: 'unarchived',
};

/** The message and fix of a refused operation, naming the current state. */
export function refusal(operation: BroadcastOperation, status: BroadcastStatus, archived: boolean): { message: string; fix: string } {
  const from = allowedFrom(operation);
  if (nextStatus(operation, status) !== undefined && archived && REFUSED_WHILE_ARCHIVED.includes(operation)) {
    return operation === 'archive'
      ? { message: `This broadcast is ${status} and already archived.`, fix: 'POST /broadcasts/{broadcastId}/unarchive restores it to the default list.' }
      : { message: `This broadcast is ${status} and archived: an archived broadcast cannot be ${VERB[operation]}.`, fix: 'Unarchive it first (POST /broadcasts/{broadcastId}/unarchive).' };
  }
  if (nextStatus(operation, status) !== undefined && !archived && NEEDS_ARCHIVED.includes(operation)) {
    return { message: `This broadcast is ${status} and not archived.`, fix: 'Only archived broadcasts can be unarchived.' };
  }
  return {
    message: `This broadcast is ${status}: it cannot be ${VERB[operation]} (only a broadcast that is ${from.join(' or ')} can).`,
    fix: FIXES[status] ?? 'GET /broadcasts/{broadcastId} shows its status.',
  };
}

const FIXES: Partial<Record<BroadcastStatus, string>> = {
  scheduled: 'Cancel the schedule first (POST /broadcasts/{broadcastId}/cancel moves it back to draft).',
  sending: 'Pause it (POST .../pause) or cancel it (POST .../cancel); a sending broadcast cannot be changed or archived.',
  paused: 'Resume it (POST .../resume) or cancel it (POST .../cancel).',
  sent: 'A sent broadcast is final: create a new broadcast to send again.',
  canceled: 'A canceled broadcast is final: create a new broadcast to send again.',
  draft: 'Send (POST .../send) or schedule (POST .../schedule) the draft first.',
};
