import { Type } from '@sinclair/typebox';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { KeysService } from './keys.service.js';

const ScopeSchema = Type.Union([Type.Literal('account'), Type.Literal('environment')], {
  description: '`account`: manages every environment, its keys and settings; `environment`: acts only inside its own environment',
});

const KeyTypeSchema = Type.Union([Type.Literal('secret'), Type.Literal('public')], {
  description: '`secret` (default): server credentials; `public`: for web pages, acts only for end users and reads what a browser may (README: Public keys)',
});

const KeyView = Type.Object({
  id: Type.String(),
  key: Type.String({ description: 'a secret key masked (the full key is shown only at creation); a public key whole' }),
  keyType: KeyTypeSchema,
  scope: ScopeSchema,
  environmentId: Type.String(),
  accountId: Type.String(),
  name: Type.String(),
  revoked: Type.Boolean(),
  createdAt: Type.String(),
  lastUsedAt: Type.Optional(Type.String()),
});

export function keyRoutes(app: App, service: KeysService): void {
  const tags = ['keys'];

  app.get(
    '/keys',
    { schema: { tags, summary: 'List the API keys of the account', response: withErrors({ 200: Type.Object({ keys: Type.Array(KeyView) }) }) } },
    async (req) => ({ keys: await service.list(req.auth.accountId) }),
  );

  app.post(
    '/keys',
    {
      schema: {
        tags,
        summary: 'Create an API key (a secret key is shown once); `keyType` defaults to secret, `scope` to environment',
        body: Type.Object({
          name: Type.String({ minLength: 1, maxLength: 200 }),
          keyType: Type.Optional(KeyTypeSchema),
          environmentId: Type.Optional(Type.String({ maxLength: 64 })),
          scope: Type.Optional(ScopeSchema),
        }),
        response: withErrors({
          200: Type.Object({
            id: Type.String(),
            key: Type.String(),
            keyType: KeyTypeSchema,
            scope: ScopeSchema,
            environmentId: Type.String(),
            name: Type.String(),
            createdAt: Type.String(),
          }),
        }),
      },
    },
    (req) => service.create(req.auth.accountId, req.body, req.auth.envId),
  );

  app.delete(
    '/keys/:keyId',
    { schema: { tags, summary: 'Revoke an API key', params: Type.Object({ keyId: Type.String() }), response: withErrors({ 200: MessageSchema }) } },
    async (req) => {
      await service.revoke(req.auth.accountId, req.params.keyId);
      return { message: 'API key revoked' };
    },
  );
}
