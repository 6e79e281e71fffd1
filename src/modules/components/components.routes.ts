import { Type } from '@sinclair/typebox';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { requireEnv } from '../auth/auth.service.js';
import type { ComponentsService } from './components.service.js';

// Not "public": GET /components/public is the parsed list.
const ComponentId = Type.String({ minLength: 1, maxLength: 100, pattern: '^(?!public$)[A-Za-z0-9_.:-]+$' });
const Html = Type.String({ maxLength: 1_000_000 });
const Name = Type.String({ minLength: 1, maxLength: 200 });

const ComponentSchema = Type.Object(
  {
    envId: Type.String(),
    componentId: Type.String(),
    name: Type.String(),
    internal: Type.String(),
    internalPage: Type.String(),
    html: Type.String(),
    createdAt: Type.String(),
    modifiedAt: Type.String(),
    referencedBy: Type.Array(Type.Object({ notificationId: Type.String(), channel: Type.String(), templateId: Type.String() })),
    channel: Type.Literal('EMAIL'),
  },
  { $id: 'Component' },
);

export function componentRoutes(app: App, service: ComponentsService): void {
  app.addSchema(ComponentSchema);
  const tags = ['components'];
  const ref = Type.Ref('Component');
  const params = Type.Object({ componentId: Type.String({ minLength: 1, maxLength: 100 }) });

  app.get(
    '/components',
    {
      schema: {
        tags,
        summary: 'List email components with the templates that use them',
        // The SDK passes a channel; only EMAIL components exist.
        querystring: Type.Object({ channel: Type.Optional(Type.String()), envId: Type.Optional(Type.String()) }),
        response: withErrors({ 200: Type.Array(ref) }),
      },
    },
    (req) => service.list(req.auth.accountId, requireEnv(req.auth)),
  );

  app.post(
    '/components',
    {
      schema: {
        tags,
        summary: "Create an email component (used in email html as {% component 'componentId' %})",
        body: Type.Object(
          {
            componentId: ComponentId,
            name: Name,
            internal: Type.Optional(Html),
            internalPage: Type.Optional(Html),
            html: Type.Optional(Html),
          },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: ref, 409: Type.Ref('ErrorBody') }),
      },
    },
    (req) => service.create(req.auth.accountId, requireEnv(req.auth), req.body),
  );

  app.get(
    '/components/:componentId',
    { schema: { tags, summary: 'Get an email component', params, response: withErrors({ 200: ref }) } },
    (req) => service.get(req.auth.accountId, requireEnv(req.auth), req.params.componentId),
  );

  app.patch(
    '/components/:componentId',
    {
      schema: {
        tags,
        summary: 'Update an email component',
        params,
        body: Type.Object(
          { name: Type.Optional(Name), internal: Type.Optional(Html), internalPage: Type.Optional(Html), html: Type.Optional(Html) },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: ref }),
      },
    },
    (req) => service.update(req.auth.accountId, requireEnv(req.auth), req.params.componentId, req.body),
  );

  app.delete(
    '/components/:componentId',
    {
      schema: {
        tags,
        summary: 'Delete an email component (refused while templates use it)',
        params,
        response: withErrors({ 200: MessageSchema, 409: Type.Ref('ErrorBody') }),
      },
    },
    async (req) => {
      await service.delete(req.auth.accountId, requireEnv(req.auth), req.params.componentId);
      return { message: 'Component deleted' };
    },
  );
}

/**
 * `GET /components/public` (the pingram SDK's listComponentsParsed): permission `browser`, so the
 * environment's public key may read it too; app.ts registers it among the routes a browser calls
 * (CORS). A static path: matched before /components/:componentId, whatever the scope.
 */
export function publicComponentRoutes(app: App, service: ComponentsService): void {
  app.get(
    '/components/public',
    {
      schema: {
        tags: ['components'],
        summary: 'List email components with `internal` (the editor document) parsed from JSON',
        response: withErrors({ 200: Type.Array(Type.Object({ ...ComponentSchema.properties, internal: Type.Unknown() })) }),
      },
    },
    (req) => service.listParsed(req.auth.accountId, requireEnv(req.auth)),
  );
}
