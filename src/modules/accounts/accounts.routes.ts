import { Type } from '@sinclair/typebox';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { AccountsService } from './accounts.service.js';

const AccountSchema = Type.Object(
  {
    accountId: Type.String(),
    organizationId: Type.String(),
    accountType: Type.Union([Type.Literal('free'), Type.Literal('paid')]),
    creator: Type.Optional(Type.String()),
    name: Type.String(),
    messagesCap: Type.Number(),
    costCap: Type.Number(),
    smsCap: Type.Optional(Type.Number()),
    callCap: Type.Optional(Type.Number()),
    billingVersion: Type.Number(),
    anniversaryDate: Type.String(),
    createdAt: Type.String(),
    updatedAt: Type.String(),
    status: Type.String(),
    subscriptionStatus: Type.Union([Type.String(), Type.Null()]),
    autoUpgrade: Type.Boolean(),
  },
  { $id: 'Account' },
);

const AccountPatch = Type.Object(
  {
    // The pingram SDK's updateAccount (POST /account) sends {name}; the spec's PATCH, autoUpgrade.
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    autoUpgrade: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export function accountRoutes(app: App, service: AccountsService): void {
  app.addSchema(AccountSchema);
  const response = withErrors({ 200: Type.Ref('Account') });

  app.get('/account', { schema: { tags: ['account'], summary: 'The account of the caller', response } }, (req) => service.get(req.auth.accountId));

  // The SDK's updateAccount uses POST; the spec documents PATCH. Both update autoUpgrade.
  for (const method of ['POST', 'PATCH'] as const) {
    app.route({
      method,
      url: '/account',
      schema: { tags: ['account'], summary: 'Update the account: its name, autoUpgrade', body: AccountPatch, response },
      handler: (req) => service.update(req.auth.accountId, req.body),
    });
  }
}
