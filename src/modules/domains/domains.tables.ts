import type { Selectable } from 'kysely';

/** The SDK's GetSendersResponseInnerStatusEnum. */
export type DomainStatus = 'NOT_STARTED' | 'PENDING' | 'SUCCESS' | 'FAILED' | 'TEMPORARY_FAILURE';
/** The SDK's GetSendersResponseInnerMailFromDomainStatusEnum. */
export type MailFromStatus = 'PENDING' | 'SUCCESS' | 'FAILED' | 'TEMPORARY_FAILURE';

/** Row of migration 0075_sender_domains. */
export interface SenderDomainsTable {
  account_id: string;
  domain: string;
  selector: string;
  dkim_public_key: string;
  dkim_private_key_enc: string;
  verification_token: string;
  status: DomainStatus;
  mail_from_status: MailFromStatus;
  /** JSON: RecordStatus per record kind. */
  record_status: string;
  verified_at: string | null;
  last_sync: string;
  next_check_at: string;
  created_at: string;
  updated_at: string;
}

// A type, not an interface: Kysely's withTables wants an index-signature-compatible record.
export type DomainTables = { sender_domains: SenderDomainsTable };
export type SenderDomainRow = Selectable<SenderDomainsTable>;
