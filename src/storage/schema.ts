/**
 * Row types of the foundation tables. Conventions that keep one code path on SQLite and
 * PostgreSQL: timestamps are ISO-8601 UTC text (sortable as text), JSON is text, booleans are
 * integers 0/1. Other modules declare their own tables and use `db.withTables<Their>()`.
 */

/**
 * The largest value of an `integer` column: PostgreSQL's is 32-bit (SQLite's is not), so a
 * number compared with or written to one is bounded here, or PostgreSQL answers 22003.
 */
export const INTEGER_COLUMN_MAX = 2_147_483_647;
export interface AccountsTable {
  id: string;
  name: string;
  account_type: string;
  creator: string | null;
  messages_cap: number;
  cost_cap: number;
  sms_cap: number | null;
  call_cap: number | null;
  billing_version: number;
  anniversary_date: string;
  status: string;
  subscription_status: string | null;
  auto_upgrade: number;
  created_at: string;
  updated_at: string;
}

export interface EnvironmentsTable {
  client_id: string;
  account_id: string;
  title: string;
  client_secret_enc: string;
  disable_sending: string;
  secure_mode: number;
  created_at: string;
  updated_at: string;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  env_id: string;
  name: string;
  key_type: string;
  /** `account` or `environment` (ApiKeyScope). */
  scope: string;
  key_hash: string;
  display: string;
  revoked: number;
  created_at: string;
  last_used_at: string | null;
}

export interface UsersTable {
  env_id: string;
  id: string;
  account_id: string;
  email: string | null;
  number: string | null;
  push_tokens: string | null;
  web_push_tokens: string | null;
  timezone: string | null;
  slack_channel: string | null;
  slack_token: string | null;
  properties: string | null;
  suppressions: string | null;
  last_seen_time: string;
  created_at: string;
  updated_at: string;
}

export interface CoreTables {
  accounts: AccountsTable;
  environments: EnvironmentsTable;
  api_keys: ApiKeysTable;
  users: UsersTable;
}
