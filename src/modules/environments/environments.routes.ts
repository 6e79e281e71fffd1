import { Type } from '@sinclair/typebox';
import { ChannelSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { EnvironmentsService } from './environments.service.js';

const EnvironmentSchema = Type.Object(
  {
    clientId: Type.String(),
    clientSecret: Type.String(),
    title: Type.String(),
    disableSending: Type.Array(ChannelSchema),
    secureMode: Type.Boolean(),
  },
  { $id: 'Environment' },
);

const Title = Type.String({ minLength: 1, maxLength: 200 });

export function environmentRoutes(app: App, service: EnvironmentsService): void {
  app.addSchema(EnvironmentSchema);
  const tags = ['environments'];

  app.get(
    '/environments',
    { schema: { tags, summary: 'List the environments of the account', response: withErrors({ 200: Type.Array(Type.Ref('Environment')) }) } },
    (req) => service.list(req.auth.accountId),
  );

  app.post(
    '/environments',
    {
      schema: {
        tags,
        summary: 'Create an environment',
        body: Type.Object({ title: Title }),
        response: withErrors({ 200: Type.Ref('Environment') }),
      },
    },
    (req) => service.create(req.auth.accountId, req.body.title),
  );

  app.patch(
    '/environments/:clientId',
    {
      schema: {
        tags,
        summary: 'Update an environment',
        params: Type.Object({ clientId: Type.String() }),
        body: Type.Object(
          {
            title: Type.Optional(Title),
            disableSending: Type.Optional(Type.Array(ChannelSchema, { maxItems: 8 })),
            secureMode: Type.Optional(Type.Boolean()),
            resetSecret: Type.Optional(Type.Boolean()),
          },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: Type.Ref('Environment') }),
      },
    },
    (req) => service.update(req.auth.accountId, req.params.clientId, req.body),
  );
}
