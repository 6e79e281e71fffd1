import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { SendingTables } from '../sending/sending.tables.js';

/** Row types of migration 0074_inbound_email. */
export interface EmailAddressesTable {
  /** prefix@domain, lower case: the key the SMTP server looks a recipient up by. */
  full_address: string;
  account_id: string;
  env_id: string;
  prefix: string;
  domain: string;
  type: 'builtin' | 'custom';
  display_name: string | null;
  created_at: string;
  updated_at: string;
}

export interface InboundEmailsTable {
  id: string;
  account_id: string;
  env_id: string;
  address: string;
  tracking_id: string | null;
  delivery_id: string | null;
  message_id: string | null;
  /** JSON: the email_inbound_* fields and `email_inbound_attachments`. */
  fields: string;
  received_at: string;
}

// A type, not an interface: Kysely's withTables wants an index-signature-compatible record.
export type AddressTables = {
  email_addresses: EmailAddressesTable;
  inbound_emails: InboundEmailsTable;
};

export type EmailAddressRow = Selectable<EmailAddressesTable>;
export type InboundEmailRow = Selectable<InboundEmailsTable>;
export type AddressesDb = Kysely<CoreTables & AddressTables & SendingTables>;
