import { Type, type TSchema } from '@sinclair/typebox';

export const CHANNELS = ['EMAIL', 'INAPP_WEB', 'SMS', 'CALL', 'VOICE', 'PUSH', 'WEB_PUSH', 'SLACK'] as const;
export type Channel = (typeof CHANNELS)[number];
export const ChannelSchema = Type.Union(CHANNELS.map((c) => Type.Literal(c)));

export const ErrorBodySchema = Type.Object(
  {
    trackingId: Type.String(),
    error: Type.Object({ code: Type.String(), message: Type.String(), fix: Type.Optional(Type.String()) }),
  },
  { $id: 'ErrorBody' },
);

/** Standard error responses added to every route's OpenAPI entry. */
export function withErrors<T extends Record<number, TSchema>>(ok: T) {
  const ref = Type.Ref('ErrorBody');
  return { ...ok, 400: ref, 401: ref, 402: ref, 404: ref, 500: ref };
}

export const MessageSchema = Type.Object({ message: Type.String() });
