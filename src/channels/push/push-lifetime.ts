// How long a push may still be stored by its provider (APNs, FCM, a web push service).
import { DeliveryError } from '../types.js';

/**
 * Where a push's lifetime (options.apn.expiry, options.fcm.android.ttl, CLARION_WEB_PUSH_TTL)
 * starts. A delivery's attempts span up to ~23 minutes (retry-schedule.ts), so a lifetime counted
 * from each attempt would let a push asked to live 10 minutes be shown half an hour after the send.
 */
export interface PushLifetimeStart {
  /** The send's own time, in ms since the epoch: its schedule, else when it was accepted. */
  atMs: number;
  /** The delivery's first attempt (a run again of it after a crash is one too). */
  firstAttempt: boolean;
}

/**
 * What is left of a lifetime at an attempt: `now-or-never` for an explicit 0 at the first attempt
 * (the provider delivers at once or drops it), else the absolute deadline and the time until it.
 */
export type PushLifetime = { kind: 'now-or-never' } | { kind: 'until'; deadlineMs: number; remainingMs: number };

/**
 * The lifetime left of a push whose sender gave `seconds`, counted from `start` (from now when
 * there is none, or its time is unreadable: a provider called outside a delivery). Throws
 * PUSH_EXPIRED, never retried, when nothing is left: the deadline has passed, or the lifetime is
 * an explicit 0 ("now or never") and this is a retry, minutes after the send it was meant for.
 * `option` names the setting, for the error's text.
 */
export function pushLifetime(seconds: number, start: PushLifetimeStart | undefined, nowMs: number, option: string): PushLifetime {
  const first = start?.firstAttempt ?? true;
  if (seconds <= 0) {
    if (first) return { kind: 'now-or-never' };
    throw new DeliveryError('PUSH_EXPIRED', `${option} is 0 (now or never): only the first attempt may send it, and this is a retry; not sent`, { retryable: false });
  }
  const startMs = start && Number.isFinite(start.atMs) ? start.atMs : nowMs;
  const deadlineMs = startMs + seconds * 1000;
  const remainingMs = deadlineMs - nowMs;
  if (remainingMs <= 0) {
    throw new DeliveryError(
      'PUSH_EXPIRED',
      `${option} (${seconds} s from the send at ${new Date(startMs).toISOString()}) ended at ${new Date(deadlineMs).toISOString()}, before this attempt; not sent`,
      { retryable: false },
    );
  }
  return { kind: 'until', deadlineMs, remainingMs };
}
