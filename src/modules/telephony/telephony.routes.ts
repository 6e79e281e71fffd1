import { Type } from '@sinclair/typebox';
import { CALLBACK_PATHS } from '../../channels/telephony/endpoint.js';
import { EMPTY_TWIML } from '../../channels/telephony/twiml.js';
import { acceptFormBodies, formOf } from '../../http/form-body.js';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { TelephonyCallbacks } from './callbacks.service.js';
import { AVAILABLE_LIMIT_DEFAULT, AVAILABLE_LIMIT_MAX, parseAvailableSearch } from './available-numbers.js';
import { type NumbersService, RELEASE_HOLD_DAYS } from './numbers.service.js';

const PhoneNumberSchema = Type.Object({
  phoneNumber: Type.String({ description: 'E.164' }),
  label: Type.Optional(Type.String()),
  createdAt: Type.String(),
  countryCode: Type.String(),
  numberType: Type.String({ description: 'local or toll_free' }),
  billingStatus: Type.Union([Type.Literal('active'), Type.Literal('released')]),
  nextBillingDate: Type.String({ description: "YYYY-MM-DD; '' for a released number" }),
  monthlyPrice: Type.Number(),
  releasedAt: Type.Optional(Type.String()),
});

const AvailableNumberSchema = Type.Object({
  phoneNumber: Type.String({ description: 'E.164' }),
  locality: Type.Optional(Type.String()),
  administrativeArea: Type.Optional(Type.String({ description: 'state or province' })),
  phoneNumberType: Type.Optional(Type.String({ description: 'local' })),
  features: Type.Optional(Type.Array(Type.String(), { description: 'sms, mms, voice' })),
  monthlyPrice: Type.Number({ description: 'what Clarion charges: 0 (Twilio bills its own rent)' }),
});

const PhoneNumberParam = Type.Object({ phoneNumber: Type.String({ minLength: 1, maxLength: 32, description: 'E.164, URL-encoded' }) });

/**
 * SMS and calls: the account's numbers and the carrier's signed callbacks (status and inbound).
 * Without Twilio credentials the local development carrier (src/local-providers/dev-carrier)
 * answers the REST side; app.ts registers it.
 */
export async function telephonyRoutes(app: App, services: { numbers: NumbersService; telephonyCallbacks: TelephonyCallbacks }): Promise<void> {
  const { numbers, telephonyCallbacks: callbacks } = services;

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

  app.get(
    '/numbers/available',
    {
      schema: {
        tags: ['numbers'],
        summary: 'Numbers the carrier can give the account: Twilio\'s local numbers in stock, or the development carrier\'s pool',
        querystring: Type.Object({
          countryCode: Type.String({ pattern: '^[A-Za-z]{2}$', description: 'ISO 3166-1 alpha-2, e.g. US' }),
          features: Type.Optional(Type.String({ maxLength: 64, description: 'comma-separated: sms, mms, voice' })),
          areaCode: Type.Optional(Type.String({ maxLength: 8 })),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: AVAILABLE_LIMIT_MAX, description: `default ${AVAILABLE_LIMIT_DEFAULT}` })),
        }),
        response: withErrors({ 200: Type.Object({ numbers: Type.Array(AvailableNumberSchema) }), 502: Type.Ref('ErrorBody'), 503: Type.Ref('ErrorBody') }),
      },
    },
    (req) => numbers.searchAvailable(parseAvailableSearch(req.query)),
  );

  app.get(
    '/numbers/released',
    {
      schema: {
        tags: ['numbers'],
        summary: `The account's numbers released in the last ${RELEASE_HOLD_DAYS} days (order one to reactivate it)`,
        response: withErrors({ 200: Type.Object({ numbers: Type.Array(PhoneNumberSchema) }) }),
      },
    },
    (req) => numbers.listReleased(req.auth.accountId),
  );

  app.delete(
    '/numbers/:phoneNumber',
    {
      schema: {
        tags: ['numbers'],
        summary: 'Release a number of the account: it no longer sends (a Twilio number is given back to Twilio)',
        params: PhoneNumberParam,
        response: withErrors({ 200: Type.Object({ phoneNumber: Type.String(), released: Type.Boolean(), releasedAt: Type.String() }), 502: Type.Ref('ErrorBody') }),
      },
    },
    (req) => numbers.release(req.auth.accountId, req.params.phoneNumber),
  );

  // Carrier-facing routes take form bodies. Their parser lives in this encapsulated scope only,
  // so it neither changes how the rest of the API reads bodies nor clashes with other modules.
  await app.register((carrierScope, _options, done) => {
    const child = carrierScope as unknown as App;
    acceptFormBodies(child);

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
    done();
  });
}
