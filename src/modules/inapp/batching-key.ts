import { createHash } from 'node:crypto';

/**
 * A type's in-app `batchingKey` names a value of the notification, as the published React client
 * reads it (it renders `{{<batchingKey>}}` against each in-app notification): e.g.
 * `parameters.postId` batches the sends that carry the same `postId` parameter. Written bare or
 * inside `{{ }}` (as NotificationAPI's documentation shows it). Only a path is accepted (names,
 * `.name`, `[0]`, `["name"]`), no Liquid filters: it is looked up, not rendered, so grouping a
 * send costs no template engine and cannot fail at delivery time.
 */
const SEGMENT = String.raw`(?:\.[A-Za-z_][\w-]*|\[\d+\]|\["[^"\]]*"\]|\['[^'\]]*'\])`;
const PATH = new RegExp(String.raw`^[A-Za-z_][\w-]*${SEGMENT}*$`);
const PART = /\.([A-Za-z_][\w-]*)|\[(\d+)\]|\["([^"\]]*)"\]|\['([^'\]]*)'\]/g;

/** Batching key values longer than this are stored as their SHA-256 (they are part of a key). */
const MAX_KEY_CHARS = 200;

/** The path inside a batchingKey (braces and spaces removed); undefined when it is not a path. */
export function batchingKeyPath(batchingKey: string): string | undefined {
  const bare = batchingKey.trim().replace(/^\{\{\s*([\s\S]*?)\s*\}\}$/, '$1').trim();
  return PATH.test(bare) ? bare : undefined;
}

/** Why a batchingKey cannot be used, or undefined when it can. */
export function batchingKeyProblem(batchingKey: string): string | undefined {
  if (batchingKeyPath(batchingKey) !== undefined) return undefined;
  return `"${batchingKey.slice(0, 100)}" is not a path into the notification`;
}

/**
 * The value a batchingKey names in `notification` (the in-app notification of a send:
 * notificationId, title, parameters, ...), as text: '' when absent, so the sends without it
 * batch together (as the React client groups them).
 */
export function batchingKeyValue(batchingKey: string | undefined, notification: Record<string, unknown>): string {
  const path = batchingKey === undefined ? undefined : batchingKeyPath(batchingKey);
  if (path === undefined) return '';
  const first = /^[A-Za-z_][\w-]*/.exec(path)![0];
  let value: unknown = own(notification, first);
  for (const match of path.slice(first.length).matchAll(PART)) {
    const name = match[1] ?? match[3] ?? match[4];
    value = name !== undefined ? own(value, name) : Array.isArray(value) ? value[Number(match[2])] : undefined;
  }
  const text = typeof value === 'string' ? value : value === undefined || value === null ? '' : JSON.stringify(value);
  return text.length <= MAX_KEY_CHARS ? text : `sha256:${createHash('sha256').update(text).digest('hex')}`;
}

/** An own property only: a key never reaches a prototype (`constructor`, `__proto__`). */
function own(value: unknown, name: string): unknown {
  if (value === null || typeof value !== 'object' || !Object.prototype.hasOwnProperty.call(value, name)) return undefined;
  return (value as Record<string, unknown>)[name];
}
