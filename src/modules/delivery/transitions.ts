/**
 * The allowed state changes of a message and of its deliveries. The ledger (ledger.ts) applies a
 * change only when this table allows it; anything else is refused, logged and never written.
 *
 * The stored values are the ones the log view reads (messages.state, deliveries.status). They map
 * onto the lifecycle queued -> sending -> sent -> delivered | failed | skipped as follows:
 *
 *   lifecycle   stored as
 *   queued      message `queued` (or `scheduled`: queued for a later time)
 *   (routed)    message `processed`: routing is decided and its deliveries exist
 *   sending     delivery `pending`: rendered, the provider call is due or being retried
 *   sent        delivery `sent`: the provider accepted it
 *   delivered   delivery `delivered`: confirmed (in-app: stored; SMS/call: the carrier's report)
 *   failed      delivery `failed`; or message `failed` when it failed before any delivery existed
 *   skipped     delivery `skipped`; today routing records skipped channels on the message
 *               (messages.skipped), and the `processed` event carries them in its details
 *   canceled    message `canceled`: its schedule was deleted before it ran
 *   digested    delivery `digested`: routing collected it into a digest (the user's or the
 *               type's delivery option on that channel is hourly, daily, weekly or monthly); it
 *               goes out inside the digest's own message (modules/digests), whose trackingId its
 *               log fields name once the digest is claimed. Failed when the digest could not be
 *               made (its recipient was deleted before it was due); retracted by a retract before
 *               its digest was sent (it then drops out of the digest).
 *   retracted   message `retracted`: retracted (POST /{clientId}/sender/retract) before it was
 *               processed, so it never makes deliveries; delivery `retracted`: a delivery still
 *               pending (its provider call not made, or waiting for a retry) or digested (its
 *               digest not sent yet) that will not be made, or an in-app notification that was
 *               removed from the user's inbox (delivered -> retracted; LedgerSession.retract
 *               applies it to in-app only: what another channel delivered stays delivered, it
 *               cannot be taken back).
 *
 * `held` is reserved for what comes next (quiet hours): declared so that code and consumers can
 * name it, with no transition into or out of it yet, so the ledger refuses it until a feature
 * defines its transitions here.
 */

export const MESSAGE_STATES = ['scheduled', 'queued', 'processed', 'canceled', 'failed', 'retracted'] as const;
export const DELIVERY_STATES = ['pending', 'sent', 'delivered', 'failed', 'skipped', 'digested', 'retracted'] as const;
/** Reserved: no transition leads into or out of them yet. */
export const RESERVED_STATES = ['held'] as const;

export type StoredMessageState = (typeof MESSAGE_STATES)[number];
export type StoredDeliveryStatus = (typeof DELIVERY_STATES)[number];
export type ReservedState = (typeof RESERVED_STATES)[number];
export type MessageState = StoredMessageState | ReservedState;
export type DeliveryStatus = StoredDeliveryStatus | ReservedState;

/** The "state" of a row that does not exist yet: its creation is a transition from NEW. */
export const NEW = 'new' as const;
export type New = typeof NEW;

export type TransitionTable<S extends string> = Readonly<Record<S | New, readonly S[]>>;

export const MESSAGE_TRANSITIONS: TransitionTable<MessageState> = {
  // Acceptance (written by the intake, which records no event yet).
  new: ['scheduled', 'queued'],
  // scheduled -> scheduled: its body or time changed (a schedule update).
  scheduled: ['scheduled', 'processed', 'canceled', 'failed', 'retracted'],
  // queued -> retracted: the worker routes only queued or scheduled messages, so it makes nothing.
  queued: ['processed', 'failed', 'retracted'],
  processed: [],
  canceled: [],
  failed: [],
  retracted: [],
  held: [],
};

export const DELIVERY_TRANSITIONS: TransitionTable<DeliveryStatus> = {
  // Created pending; or failed at once (its content could not be rendered); or skipped (routing);
  // or collected into a digest (routing, the channel's delivery option being a digest).
  new: ['pending', 'failed', 'skipped', 'digested'],
  // A retry keeps a delivery pending (an attempt, not a transition).
  // pending -> retracted: a retract before the provider call (delivery jobs skip what is not pending).
  pending: ['sent', 'delivered', 'failed', 'retracted'],
  // The provider's report (SMS and call status callbacks).
  sent: ['delivered', 'failed'],
  // An in-app notification removed by a retract (in-app only: see the header).
  delivered: ['retracted'],
  failed: [],
  skipped: [],
  retracted: [],
  held: [],
  // Its digest could not be made (the recipient was deleted before it was due); or a retract
  // before its digest was sent.
  digested: ['failed', 'retracted'],
};

export type TransitionKind = 'message' | 'delivery';

export function messageTransitionAllowed(from: MessageState | New, to: MessageState): boolean {
  return MESSAGE_TRANSITIONS[from]?.includes(to) ?? false;
}

export function deliveryTransitionAllowed(from: DeliveryStatus | New, to: DeliveryStatus): boolean {
  return DELIVERY_TRANSITIONS[from]?.includes(to) ?? false;
}

export function transitionAllowed(kind: TransitionKind, from: string, to: string): boolean {
  return kind === 'message'
    ? messageTransitionAllowed(from as MessageState | New, to as MessageState)
    : deliveryTransitionAllowed(from as DeliveryStatus | New, to as DeliveryStatus);
}

/** The states a row may be in for a change into `to` (the WHERE of a conditional update). */
export function allowedFrom<S extends string>(table: TransitionTable<S>, to: S): S[] {
  return (Object.keys(table) as (S | New)[]).filter((from): from is S => from !== NEW && table[from].includes(to));
}
