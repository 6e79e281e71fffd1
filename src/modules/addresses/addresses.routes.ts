import { Type } from '@sinclair/typebox';
import { EmptyBody, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { notFound } from '../../errors.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import type { AddressesService } from './addresses.service.js';
import type { InboundMailService } from './inbound.service.js';

/** The pingram SDK's AccountAddressesResponseAddressesInner. */
const AddressSchema = Type.Object({
  fullAddress: Type.String(),
  prefix: Type.String(),
  domain: Type.String(),
  type: Type.Union([Type.Literal('builtin'), Type.Literal('custom')]),
  displayName: Type.Optional(Type.String()),
  createdAt: Type.String(),
});
const AddressResponse = Type.Object({ address: AddressSchema });
const CreateBody = Type.Object(
  {
    prefix: Type.String({ minLength: 1, maxLength: 64, description: 'local part; lower-cased' }),
    domain: Type.Optional(Type.String({ maxLength: 253, description: 'a verified domain of the account (custom address); omit for a built-in address on the mail domain' })),
    displayName: Type.Optional(Type.String({ maxLength: 128 })),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    fullAddress: Type.String({ minLength: 3, maxLength: 320 }),
    prefix: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    displayName: Type.Optional(Type.String({ maxLength: 128 })),
  },
  { additionalProperties: false },
);
const InboundSchema = Type.Object({
  id: Type.String(),
  address: Type.String({ description: 'the inbound address it arrived at' }),
  trackingId: Type.Optional(Type.String({ description: 'the outbound message it replies to' })),
  receivedAt: Type.String(),
  fields: Type.Record(Type.String(), Type.Unknown(), { description: 'the email_inbound_* fields, as in the log record' }),
});

/** Inbound addresses (the pingram SDK's AddressesApi) and the mail they received. */
export function addressRoutes(app: App, addresses: AddressesService, inbound: InboundMailService): void {
  const tags = ['addresses'];
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });

  app.post(
    '/addresses',
    { schema: { tags, summary: 'Create an inbound address (pingram SDK createAddress): without domain, prefix@<mail domain>', body: CreateBody, response: withErrors({ 200: AddressResponse }) } },
    async (req) => ({ address: await addresses.create(scope(req.auth), req.body) }),
  );
  app.get(
    '/addresses',
    { schema: { tags, summary: "This environment's inbound addresses (pingram SDK listAddresses)", response: withErrors({ 200: Type.Object({ addresses: Type.Array(AddressSchema) }) }) } },
    async (req) => ({ addresses: await addresses.list(scope(req.auth)) }),
  );
  app.patch(
    '/addresses',
    { schema: { tags, summary: 'Rename or relabel an inbound address (pingram SDK updateAddress)', body: UpdateBody, response: withErrors({ 200: AddressResponse }) } },
    async (req) => ({ address: await addresses.update(scope(req.auth), req.body) }),
  );
  app.delete(
    '/addresses/:fullAddress',
    { schema: { tags, summary: 'Delete a custom inbound address; built-in ones cannot be deleted', params: Type.Object({ fullAddress: Type.String({ minLength: 3, maxLength: 320 }) }), response: withErrors({ 200: EmptyBody }) } },
    async (req, reply) => {
      await addresses.delete(scope(req.auth), req.params.fullAddress);
      return reply.code(200).send();
    },
  );

  app.get(
    '/inbound-emails',
    {
      schema: {
        tags,
        summary: 'Mail received at this environment\'s addresses, newest first (replies and new mail)',
        querystring: Type.Object({
          cursor: Type.Optional(Type.String({ maxLength: 64 })),
          limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
          trackingId: Type.Optional(Type.String({ maxLength: 64, description: 'only replies to this outbound message' })),
          address: Type.Optional(Type.String({ maxLength: 320, description: 'only mail to this address' })),
        }),
        response: withErrors({ 200: Type.Object({ emails: Type.Array(InboundSchema), nextCursor: Type.Optional(Type.String()) }) }),
      },
    },
    (req) => inbound.list(scope(req.auth), req.query),
  );
  app.get(
    '/inbound-emails/:inboundId',
    { schema: { tags, summary: 'One inbound email', params: Type.Object({ inboundId: Type.String({ minLength: 1, maxLength: 64 }) }), response: withErrors({ 200: InboundSchema }) } },
    async (req) => {
      const found = await inbound.find(scope(req.auth), req.params.inboundId);
      if (!found) throw notFound('Inbound email', req.params.inboundId);
      return found;
    },
  );
}
