import { DeliveryError } from '../types.js';

/** The forms of a user's `slackChannel`. */
export type SlackDestination =
  /** A conversation id (C public, G private/group, D direct message): posted to as is. */
  | { kind: 'channel_id'; id: string }
  /** A channel name, with or without `#`: posted to as `#name`, Slack resolves it. */
  | { kind: 'channel_name'; name: string }
  /** A user id (U, or W on Enterprise Grid): a direct message through conversations.open. */
  | { kind: 'user_id'; id: string }
  /** `@handle`: looked up with users.list (name, then display name), then a direct message. */
  | { kind: 'username'; name: string };

const CONVERSATION_ID = /^[CGD][A-Z0-9]{2,}$/;
const USER_ID = /^[UW][A-Z0-9]{2,}$/;

export function parseSlackDestination(raw: string | null | undefined): SlackDestination {
  const value = (raw ?? '').trim();
  if (value.startsWith('@')) {
    const name = value.slice(1).trim();
    if (name) return { kind: 'username', name };
  } else if (value.startsWith('#')) {
    const name = value.slice(1).trim();
    if (name) return { kind: 'channel_name', name };
  } else if (CONVERSATION_ID.test(value)) {
    return { kind: 'channel_id', id: value };
  } else if (USER_ID.test(value)) {
    return { kind: 'user_id', id: value };
  } else if (value) {
    return { kind: 'channel_name', name: value };
  }
  throw new DeliveryError('NO_SLACK_DESTINATION', `"${value}" is not a Slack destination`, { retryable: false });
}

/** Minimal shape of a users.list member used for @handle matching. */
export interface SlackMember {
  id?: string;
  name?: string;
  deleted?: boolean;
  profile?: { display_name?: string; display_name_normalized?: string };
}

/** How well a member matches `@handle`: 2 = username, 1 = display name, 0 = no match. Case-insensitive. */
export function memberMatch(member: SlackMember, handle: string): 0 | 1 | 2 {
  if (!member.id || member.deleted) return 0;
  const wanted = handle.toLowerCase();
  if (member.name?.toLowerCase() === wanted) return 2;
  const display = [member.profile?.display_name, member.profile?.display_name_normalized];
  return display.some((d) => d && d.toLowerCase() === wanted) ? 1 : 0;
}
