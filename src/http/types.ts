import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';

/** The Fastify instance every routes file receives: TypeBox schemas give typed handlers. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/** How a route authenticates its caller. */
export type RouteAuth =
  /** API key, environment Basic credentials or a JWT acting on an account (the default). */
  | 'account'
  /** In-app end users: clientId + userId (+ user hash in secure mode). */
  | 'inapp'
  /** No credentials: health, metrics, OpenAPI, provider callbacks that verify their own signatures. */
  | 'none';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set from the permission matrix (src/http/permissions.ts) when the route is added. */
    auth?: RouteAuth;
    permission?: import('./permissions.js').Permission;
  }
}
