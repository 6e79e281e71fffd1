/** The time source every service reads (tests move a ManualClock by hand). */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** The id source every service draws from. */
export interface Ids {
  /** Time-ordered UUIDv7 (package uuidv7). */
  uuid(): string;
}
