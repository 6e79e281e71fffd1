import type { Permission, RouteAuth } from './permissions.js';
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

export type { RouteAuth };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set from the permission matrix (src/http/permissions.ts) when the route is added. */
    auth?: RouteAuth;
    permission?: Permission;
  }
}
