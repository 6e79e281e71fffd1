import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { MessageSchema, NotificationTypeId, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { requireEnv } from '../auth/auth.service.js';
import { componentRoutes } from '../components/components.routes.js';
import type { ComponentsService } from '../components/components.service.js';
import { PathId, typeRoutes } from '../types/types.routes.js';
import type { TypesService } from '../types/types.service.js';
import { DELIVERY_MODES, contentProperties } from './template-fields.js';
import type { TemplatesService } from './templates.service.js';

const TemplateSchema = Type.Object(
  {
    envId: Type.String(),
    notificationId: Type.String(),
    templateId: Type.String(),
    channel: Type.String(),
    default: Type.Boolean(),
    isDefaultFor: Type.Optional(Type.Record(Type.String(), Type.Boolean())),
    ...contentProperties,
  },
  { $id: 'Template' },
);

/** Notification types, templates and email components. */
export function templateRoutes(app: App, services: { types: TypesService; components: ComponentsService; templates: TemplatesService }): void {
  // The app's JSON parser (src/http/json-body.ts) reads an empty body as none, as the pingram SDK
  // sends on DELETE, and refuses __proto__ keys, NUL characters and deep nesting: no parser of its own here.
  app.register((plugin, _options, done) => {
    const scope = plugin.withTypeProvider<TypeBoxTypeProvider>();
    typeRoutes(scope, services.types);
    componentRoutes(scope, services.components);
    templateOnlyRoutes(scope, services.templates);
    done();
  });
}

function templateOnlyRoutes(app: App, service: TemplatesService): void {
  app.addSchema(TemplateSchema);
  const tags = ['templates'];
  const ref = Type.Ref('Template');
  // Channel is checked by the service (case-insensitive, with the lower-case log names as aliases).
  const base = { notificationId: NotificationTypeId, channel: Type.String({ minLength: 1, maxLength: 32 }) };
  const listParams = Type.Object(base);
  const itemParams = Type.Object({ ...base, templateId: PathId });
  const path = '/notifications/:notificationId/:channel/templates';

  app.get(
    path,
    { schema: { tags, summary: 'List the templates of a notification on a channel', params: listParams, response: withErrors({ 200: Type.Array(ref) }) } },
    (req) => service.list(req.auth.accountId, requireEnv(req.auth), req.params.notificationId, req.params.channel),
  );

  app.post(
    path,
    {
      schema: {
        tags,
        summary: 'Create a template (the first one of a notification and channel becomes its default)',
        params: listParams,
        body: Type.Object({ templateId: PathId, ...contentProperties }, { additionalProperties: false }),
        response: withErrors({ 200: ref, 409: Type.Ref('ErrorBody') }),
      },
    },
    (req) => service.create(req.auth.accountId, requireEnv(req.auth), req.params.notificationId, req.params.channel, req.body),
  );

  // Registered before /:templateId; the static segment wins in the router either way.
  app.patch(
    `${path}/default-selection`,
    {
      schema: {
        tags,
        summary: 'Make a template the default for delivery modes (instant when modes is empty)',
        params: listParams,
        body: Type.Object(
          {
            templateId: PathId,
            modes: Type.Optional(Type.Array(Type.Union(DELIVERY_MODES.map((m) => Type.Literal(m))), { maxItems: DELIVERY_MODES.length })),
          },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: ref }),
      },
    },
    (req) =>
      service.setDefault(req.auth.accountId, requireEnv(req.auth), req.params.notificationId, req.params.channel, req.body.templateId, req.body.modes),
  );

  app.get(
    `${path}/:templateId`,
    { schema: { tags, summary: 'Get a template', params: itemParams, response: withErrors({ 200: ref }) } },
    (req) => service.get(req.auth.accountId, requireEnv(req.auth), req.params.notificationId, req.params.channel, req.params.templateId),
  );

  app.patch(
    `${path}/:templateId`,
    {
      schema: {
        tags,
        summary: 'Update the content fields of a template',
        params: itemParams,
        body: Type.Object(contentProperties, { additionalProperties: false }),
        response: withErrors({ 200: ref }),
      },
    },
    (req) =>
      service.update(req.auth.accountId, requireEnv(req.auth), req.params.notificationId, req.params.channel, req.params.templateId, req.body),
  );

  app.delete(
    `${path}/:templateId`,
    { schema: { tags, summary: 'Delete a template (another one becomes default if it was)', params: itemParams, response: withErrors({ 200: MessageSchema }) } },
    async (req) => {
      await service.delete(req.auth.accountId, requireEnv(req.auth), req.params.notificationId, req.params.channel, req.params.templateId);
      return { message: 'Template deleted' };
    },
  );
}
