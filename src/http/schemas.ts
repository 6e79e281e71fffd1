import { Type, type TSchema } from '@sinclair/typebox';

export const CHANNELS = ['EMAIL', 'INAPP_WEB', 'SMS', 'CALL', 'VOICE', 'PUSH', 'WEB_PUSH', 'SLACK'] as const;
export type Channel = (typeof CHANNELS)[number];
/**
 * A notification type id, wherever one is given: a send's `type`, a broadcast's, the types and
 * templates routes' path, preferences. One schema, so that a type a send creates can always be
 * read, changed and deleted (a path parameter comes URL-decoded: `a%2Fb` is the id `a/b`).
 */
export const NotificationTypeId = Type.String({ minLength: 1, maxLength: 200, description: 'notification type id' });

export const ChannelSchema = Type.Union(CHANNELS.map((c) => Type.Literal(c)));

export const ErrorBodySchema = Type.Object(
  {
    trackingId: Type.String(),
    error: Type.Object({ code: Type.String(), message: Type.String(), fix: Type.String() }),
  },
  { $id: 'ErrorBody' },
);

/** Standard error responses added to every route's OpenAPI entry. */
export function withErrors<T extends Record<number, TSchema>>(ok: T) {
  const ref = Type.Ref('ErrorBody');
  return { ...ok, 400: ref, 401: ref, 402: ref, 404: ref, 500: ref };
}

export const MessageSchema = Type.Object({ message: Type.String() });

/**
 * A success with an empty body, as the spec has it for a delete ("empty body"; its status the
 * default 200): described for the OpenAPI document, the route sends no payload.
 */
export const EmptyBody = Type.Unsafe<void>({ description: 'empty body' });

/**
 * A response whose body is not JSON (an image, a page, a MIME message): described for the OpenAPI
 * document only, as Fastify sends a string or Buffer body as it is.
 */
export const MediaResponse = (mediaType: string, description: string, schema: TSchema = Type.String()) =>
  Type.Unsafe<string | Buffer>({ description, content: { [mediaType]: { schema } } });

// Date, then optionally a time (seconds and fraction optional) and a zone: the forms Date reads.
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:[Zz]|[+-](\d{2}):?(\d{2}))?)?$/;

/**
 * An ISO 8601 date-time that names a real instant: `2026-02-30`, `2026-13-01` and `T25:00` are
 * refused (Date would roll them over or read them as another day), as are years past 9999.
 */
export function isCalendarDateTime(text: string): boolean {
  const m = ISO_DATE_TIME.exec(text);
  if (!m) return false;
  const [year, month, day, hour, minute, second, zoneH, zoneM] = m.slice(1).map((part) => (part === undefined ? 0 : Number(part)));
  if (month < 1 || month > 12 || day < 1) return false;
  if (day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return false;
  if (hour > 23 || minute > 59 || second > 59 || zoneH > 23 || zoneM > 59) return false;
  return !Number.isNaN(Date.parse(text));
}

/**
 * Installs the `date-time` format used by every ISO date field of the API (after ajv-formats,
 * whose RFC 3339 version requires seconds and a zone that clients of this API may omit).
 */
export function installFormats(ajv: { addFormat(name: string, format: (text: string) => boolean): unknown }): void {
  ajv.addFormat('date-time', isCalendarDateTime);
}

/** An ISO 8601 date-time input field (see isCalendarDateTime). */
export const IsoDateTime = (options: { description?: string } = {}) => Type.String({ format: 'date-time', maxLength: 64, ...options });

/** A string enum that fails with "must be equal to one of the allowed values" (not an anyOf of literals). */
export const StringEnum = <T extends string>(values: readonly T[], description?: string) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });
