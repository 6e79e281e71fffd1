import { Type } from '@sinclair/typebox';
import { DEV_CARRIER_PREFIX, CALLBACK_PATHS, telephonyEndpoint } from '../../channels/telephony/endpoint.js';
import { type FormParams, parseForm } from '../../channels/telephony/signature.js';
import { EMPTY_TWIML } from '../../channels/telephony/twiml.js';
import type { Deps } from '../../deps.js';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import { TelephonyCallbacks } from './callbacks.service.js';
import { DevCarrier } from './dev-carrier.js';
import { NumbersService } from './numbers.service.js';

const FORM = 'application/x-www-form-urlencoded';
const formOf = (body: unknown): FormParams => (body && typeof body === 'object' && !Array.isArray(body) ? (body as FormParams) : {});

const PhoneNumberSchema = Type.Object({
  phoneNumber: Type.String({ description: 'E.164' }),
  label: Type.Optional(Type.String()),
  createdAt: Type.String(),
  countryCode: Type.String(),
  numberType: Type.String({ description: 'local or toll_free' }),
  billingStatus: Type.Union([Type.Literal('active'), Type.Literal('released')]),
  nextBillingDate: Type.String(),
  monthlyPrice: Type.Number(),
});

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

/**
 * SMS and calls: the account's numbers, the carrier's signed callbacks (status and inbound), and,
 * without Twilio credentials, the local development carrier. Registered in app.ts.
 */
export async function telephonyRoutes(app: App, deps: Deps): Promise<void> {
  const numbers = new NumbersService(deps);
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });

  app.get(
    '/numbers/list',
    {
      schema: {
        tags: ['numbers'],
        summary: "The account's phone numbers (SMS and call senders) and the shared sender",
        response: withErrors({ 200: Type.Object({ numbers: Type.Array(PhoneNumberSchema), sharedNumber: Type.String() }) }),
      },
    },
    (req) => numbers.list(req.auth.accountId),
  );

  app.post(
    '/numbers/order',
    {
      schema: {
        tags: ['numbers'],
        summary: 'Register a number for the account: one of the Twilio account\'s numbers (any free number with the development carrier)',
        body: Type.Object({ phoneNumber: Type.String({ maxLength: 32 }) }),
        response: withErrors({ 200: Type.Object({ orderId: Type.String(), status: Type.String(), phoneNumber: Type.String() }) }),
      },
    },
    (req) => numbers.order(req.auth.accountId, req.body.phoneNumber),
  );

  // Carrier-facing routes take form bodies. Their parser lives in this encapsulated scope only,
  // so it neither changes how the rest of the API reads bodies nor clashes with other modules.
  await app.register(async (carrierScope) => {
    const child = carrierScope as unknown as App;
    if (child.hasContentTypeParser(FORM)) child.removeContentTypeParser(FORM);
    child.addContentTypeParser(FORM, { parseAs: 'string' }, (_req, body, done) => done(null, parseForm(String(body))));

    const callbacks = new TelephonyCallbacks(deps);
    const callbackSchema = (summary: string) => ({
      tags: ['telephony'],
      summary,
      description: 'Twilio protocol: called by the carrier with a form body; authenticated by X-Twilio-Signature (401 without, 403 when wrong). Answers what Twilio expects (204, or TwiML); refusals carry the Error body.',
      response: withErrors({ 204: Type.Null(), 403: Type.Ref('ErrorBody') }),
    });
    child.post(CALLBACK_PATHS.smsStatus, { config: { auth: 'none' }, schema: callbackSchema('SMS status callback (Twilio protocol)') }, async (req, reply) => {
      const params = formOf(req.body);
      callbacks.verify(req.url, req.headers['x-twilio-signature'], params);
      await callbacks.smsStatus(params);
      return reply.code(204).send(null);
    });
    child.post(CALLBACK_PATHS.callStatus, { config: { auth: 'none' }, schema: callbackSchema('Call status callback (Twilio protocol)') }, async (req, reply) => {
      const params = formOf(req.body);
      callbacks.verify(req.url, req.headers['x-twilio-signature'], params);
      await callbacks.callStatus(params);
      return reply.code(204).send(null);
    });
    child.post(CALLBACK_PATHS.inbound, { config: { auth: 'none' }, schema: callbackSchema('Inbound SMS webhook (Twilio protocol); answers TwiML') }, async (req, reply) => {
      const params = formOf(req.body);
      callbacks.verify(req.url, req.headers['x-twilio-signature'], params);
      await callbacks.inbound(params);
      return reply.type('text/xml').send(EMPTY_TWIML);
    });

    if (telephonyEndpoint(deps)?.dev) registerDevCarrier(child, deps, scope);
  });
}

function registerDevCarrier(app: App, deps: Deps, scope: (auth: AuthContext) => { accountId: string; envId: string }): void {
  const carrier = new DevCarrier(deps);
  app.addHook('onClose', () => carrier.drain());
  const tags = ['development carrier'];
  const rest = `${DEV_CARRIER_PREFIX}/2010-04-01/Accounts/:accountSid`;
  const restSchema = (summary: string) => ({ tags, summary, description: 'Twilio REST protocol: Basic AccountSid:AuthToken, form body, Twilio JSON resources. By design its errors are Twilio\'s error JSON ({code, message, more_info, status}), not this API\'s Error body, so Twilio clients read them.', params: Type.Object({ accountSid: Type.String(), resource: Type.Optional(Type.String()) }) });

  app.post(`${rest}/Messages.json`, { config: { auth: 'none' }, schema: restSchema('Create a message') }, async (req, reply) => {
    const out = carrier.authenticate(req.headers.authorization, req.params.accountSid) ?? (await carrier.createMessage(formOf(req.body)));
    return reply.code(out.status).send(out.body);
  });
  app.post(`${rest}/Calls.json`, { config: { auth: 'none' }, schema: restSchema('Create a call') }, async (req, reply) => {
    const out = carrier.authenticate(req.headers.authorization, req.params.accountSid) ?? (await carrier.createCall(formOf(req.body)));
    return reply.code(out.status).send(out.body);
  });
  for (const [path, kind] of [['Messages', 'sms'], ['Calls', 'call']] as const) {
    app.get(`${rest}/${path}/:resource`, { config: { auth: 'none' }, schema: restSchema(`Fetch a ${kind === 'sms' ? 'message' : 'call'}`) }, async (req, reply) => {
      const sid = (req.params.resource ?? '').replace(/\.json$/, '');
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
