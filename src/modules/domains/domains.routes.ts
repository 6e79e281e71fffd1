import { Type } from '@sinclair/typebox';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { DomainsService } from './domains.service.js';

const Status = Type.Union(['NOT_STARTED', 'PENDING', 'SUCCESS', 'FAILED', 'TEMPORARY_FAILURE'].map((s) => Type.Literal(s)));
const RecordSchema = Type.Object({
  type: Type.Union([Type.Literal('TXT'), Type.Literal('CNAME')]),
  name: Type.String(),
  value: Type.String(),
  purpose: Type.Union(['dkim', 'verification', 'spf', 'returnPath'].map((s) => Type.Literal(s))),
  required: Type.Boolean({ description: 'needed for status SUCCESS; the others make up mailFromDomainStatus' }),
  status: Type.Union(['found', 'missing', 'error', 'unchecked'].map((s) => Type.Literal(s))),
});
/** The pingram SDK's GetSendersResponseInner, without privateDKIMKey (never answered), with the records to publish. */
const DomainSchema = Type.Object({
  sender: Type.String(),
  status: Status,
  lastSync: Type.String(),
  verificationTokens: Type.Array(Type.String()),
  mailFromDomainStatus: Type.Union(['PENDING', 'SUCCESS', 'FAILED', 'TEMPORARY_FAILURE'].map((s) => Type.Literal(s))),
  createdAt: Type.String(),
  selector: Type.String(),
  dnsRecords: Type.Array(RecordSchema),
});
const SenderParams = Type.Object({ sender: Type.String({ minLength: 1, maxLength: 320 }) });

/** Sender domains of the account (the pingram SDK's DomainsApi) and their verification. */
export function domainRoutes(app: App, domains: DomainsService): void {
  const tags = ['domains'];
  app.get(
    '/domains',
    { schema: { tags, summary: "The account's sender domains (pingram SDK listDomains)", response: withErrors({ 200: Type.Array(DomainSchema) }) } },
    (req) => domains.list(req.auth.accountId),
  );
  app.post(
    '/domains',
    {
      schema: {
        tags,
        summary: 'Add a sender domain and check its records (pingram SDK addDomain); answers every domain of the account with the DNS records to publish',
        body: Type.Object({ sender: Type.String({ minLength: 1, maxLength: 320, description: 'a domain, or an email address whose domain is added' }) }, { additionalProperties: false }),
        response: withErrors({ 200: Type.Array(DomainSchema) }),
      },
    },
    (req) => domains.add(req.auth.accountId, req.body.sender),
  );
  app.delete(
    '/domains/:sender',
    { schema: { tags, summary: 'Remove a sender domain (pingram SDK deleteDomain); its DKIM key is deleted', params: SenderParams, response: withErrors({ 200: Type.Object({ success: Type.Boolean() }) }) } },
    async (req) => {
      await domains.delete(req.auth.accountId, req.params.sender);
      return { success: true };
    },
  );
  app.post(
    '/domains/:sender/verify',
    { schema: { tags, summary: "Look the domain's records up now", params: SenderParams, response: withErrors({ 200: DomainSchema }) } },
    (req) => domains.verify(req.auth.accountId, req.params.sender),
  );
}
