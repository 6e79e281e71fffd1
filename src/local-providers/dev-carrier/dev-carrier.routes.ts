import { type TProperties, Type } from '@sinclair/typebox';
import { DEV_CARRIER_PREFIX } from '../../channels/telephony/endpoint.js';
import { acceptFormBodies, formOf } from '../../http/form-body.js';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../../modules/auth/auth.service.js';
import type { DevCarrier } from './dev-carrier.js';

const CarrierMessageSchema = Type.Object({
  sid: Type.String(),
  direction: Type.Union([Type.Literal('outbound'), Type.Literal('inbound')]),
  from: Type.String(),
  to: Type.String(),
  body: Type.Optional(Type.String()),
  mediaUrls: Type.Optional(Type.Array(Type.String())),
  spokenText: Type.Optional(Type.String()),
  status: Type.String(),
  errorCode: Type.Optional(Type.Integer()),
  segments: Type.Optional(Type.Integer()),
  durationSeconds: Type.Optional(Type.Integer()),
  price: Type.Optional(Type.Number({ description: 'USD' })),
  trackingId: Type.Optional(Type.String()),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

// Open objects: these routes answer Twilio's JSON, and the API's Error body when Fastify refuses a request.
const TwilioResourceSchema = Type.Object({ sid: Type.Optional(Type.String()), status: Type.Optional(Type.String()) }, { additionalProperties: true, description: "Twilio's Message or Call resource" });
const TwilioErrorSchema = Type.Object(
  { code: Type.Optional(Type.Integer()), message: Type.Optional(Type.String()), more_info: Type.Optional(Type.String()), status: Type.Optional(Type.Integer()) },
  { additionalProperties: true, description: "Twilio's error JSON" },
);

/**
 * The development carrier's routes under /dev-carrier (registered by app.ts when no Twilio
 * credentials are configured): the Twilio REST side its SMS and call adapters talk to, and what
 * a developer reads and simulates. Its REST routes take form bodies, in a scope of their own.
 */
export async function devCarrierRoutes(parent: App, carrier: DevCarrier): Promise<void> {
  await parent.register((carrierScope, _options, done) => {
    const app = carrierScope as unknown as App;
    acceptFormBodies(app);
    registerRoutes(app, carrier);
    done();
  });
}

function registerRoutes(app: App, carrier: DevCarrier): void {
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });
  app.addHook('onClose', () => carrier.drain());
  const tags = ['development carrier'];
  const rest = `${DEV_CARRIER_PREFIX}/2010-04-01/Accounts/:accountSid`;
  const restSchema = <P extends TProperties>(summary: string, params: P, ok: 200 | 201) => ({
    tags,
    summary,
    description: 'Twilio REST protocol: Basic AccountSid:AuthToken, form body, Twilio JSON resources. By design its errors are Twilio\'s error JSON ({code, message, more_info, status}), not this API\'s Error body, so Twilio clients read them.',
    params: Type.Object({ accountSid: Type.String(), ...params }),
    response: { [ok]: TwilioResourceSchema, 400: TwilioErrorSchema, 401: TwilioErrorSchema, 404: TwilioErrorSchema },
  });

  app.post(`${rest}/Messages.json`, { config: { auth: 'none' }, schema: restSchema('Create a message', {}, 201) }, async (req, reply) => {
    const out = carrier.authenticate(req.headers.authorization, req.params.accountSid) ?? (await carrier.createMessage(formOf(req.body)));
    return reply.code(out.status).send(out.body);
  });
  app.post(`${rest}/Calls.json`, { config: { auth: 'none' }, schema: restSchema('Create a call', {}, 201) }, async (req, reply) => {
    const out = carrier.authenticate(req.headers.authorization, req.params.accountSid) ?? (await carrier.createCall(formOf(req.body)));
    return reply.code(out.status).send(out.body);
  });
  for (const [path, kind] of [['Messages', 'sms'], ['Calls', 'call']] as const) {
    const dateParam = kind === 'sms' ? 'DateSent' : 'StartTime';
    const day = (description: string) => Type.Optional(Type.String({ maxLength: 10, description }));
    const listQuery = Type.Object(
      {
        To: Type.Optional(Type.String({ maxLength: 32 })),
        From: Type.Optional(Type.String({ maxLength: 32 })),
        [dateParam]: day('YYYY-MM-DD (GMT)'),
        [`${dateParam}>`]: day(`on or after this day (the query reads ${dateParam}>=YYYY-MM-DD)`),
        [`${dateParam}<`]: day(`on or before this day (${dateParam}<=YYYY-MM-DD)`),
        PageSize: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$' })),
      },
      { additionalProperties: true },
    );
    const summary = `List ${kind === 'sms' ? 'messages' : 'calls'}, newest first (one page)`;
    app.get(`${rest}/${path}.json`, { config: { auth: 'none' }, schema: { ...restSchema(summary, {}, 200), querystring: listQuery } }, async (req, reply) => {
      const out = carrier.authenticate(req.headers.authorization, req.params.accountSid) ?? (await carrier.restList(kind, req.query, req.url.slice(req.url.indexOf('/2010-04-01'))));
      return reply.code(out.status).send(out.body);
    });
    app.get(`${rest}/${path}/:resource`, { config: { auth: 'none' }, schema: restSchema(`Fetch a ${kind === 'sms' ? 'message' : 'call'}`, { resource: Type.String({ description: 'its sid, optionally with .json' }) }, 200) }, async (req, reply) => {
      const sid = req.params.resource.replace(/\.json$/, '');
      const out = carrier.authenticate(req.headers.authorization, req.params.accountSid) ?? (await carrier.fetch(kind, sid));
      return reply.code(out.status).send(out.body);
    });
  }

  const listQuery = Type.Object({ to: Type.Optional(Type.String({ maxLength: 32 })), limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })) });
  app.get(
    `${DEV_CARRIER_PREFIX}/messages`,
    { schema: { tags, summary: 'SMS the development carrier was given (and inbound ones simulated) in this environment, newest first', querystring: listQuery, response: withErrors({ 200: Type.Object({ messages: Type.Array(CarrierMessageSchema) }) }) } },
    async (req) => ({ messages: await carrier.list(scope(req.auth), 'sms', req.query) }),
  );
  app.get(
    `${DEV_CARRIER_PREFIX}/calls`,
    { schema: { tags, summary: 'Calls the development carrier was asked to place in this environment, newest first', querystring: listQuery, response: withErrors({ 200: Type.Object({ calls: Type.Array(CarrierMessageSchema) }) }) } },
    async (req) => ({ calls: await carrier.list(scope(req.auth), 'call', req.query) }),
  );
  app.post(
    `${DEV_CARRIER_PREFIX}/inbound`,
    {
      schema: {
        tags,
        summary: "Simulate a user texting one of the account's numbers: the carrier delivers the signed inbound webhook",
        body: Type.Object({
          from: Type.String({ maxLength: 32, description: "the user's number" }),
          to: Type.Optional(Type.String({ maxLength: 32, description: "one of the account's numbers; default: its default number" })),
          text: Type.String({ maxLength: 1600 }),
          mediaUrls: Type.Optional(Type.Array(Type.String({ maxLength: 2048 }), { maxItems: 10 })),
        }),
        response: withErrors({
          200: Type.Object({ sid: Type.String(), from: Type.String(), to: Type.String(), webhook: Type.Object({ status: Type.Integer(), body: Type.String() }) }),
        }),
      },
    },
    (req) => carrier.simulateInbound(scope(req.auth), req.body),
  );
}
