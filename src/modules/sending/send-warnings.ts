import { SEND_CHANNELS, type SendChannel } from './channels.js';
import type { SendBody } from './sending.schemas.js';

/**
 * What the body of a send makes unusable, told in the answer's `messages` (so the send is answered
 * 202) instead of being accepted and dropped without a word. Worked out from the body alone:
 * inline content for a channel that `forceChannels` leaves out, and, when no channel left has
 * inline content, the channels whose templates could still carry it (`templatesFor`; the caller
 * reads them once). Routing that depends on stored state (the user's address, preferences, the
 * type's channels) happens after the answer and is in the log's `<channel>_routing_reason`.
 */
export interface ContentCheck {
  messages: string[];
  /** Non-null: no channel has inline content; the send reaches one only through a template on one of these. */
  templatesFor: SendChannel[] | null;
}

export function checkContent(body: SendBody): ContentCheck {
  const forced = body.forceChannels?.length ? new Set<string>(body.forceChannels) : null;
  const messages: string[] = [];
  let usable = false;
  for (const { channel, body: key } of SEND_CHANNELS) {
    if (body[key] === undefined) continue;
    if (forced && !forced.has(channel)) messages.push(`${key} content is not used: ${channel} is not in forceChannels.`);
    else usable = true;
  }
  if (usable) return { messages, templatesFor: null };
  return { messages, templatesFor: SEND_CHANNELS.map((c) => c.channel).filter((c) => !forced || forced.has(c)) };
}

/** The warning of a send that no channel can carry: no inline content and no template on the channels it may use. */
export function noChannelMessage(type: string, channels: readonly SendChannel[], forced: boolean): string {
  const where = forced ? ` on forceChannels (${channels.join(', ')})` : '';
  return (
    `This send reaches no channel: no inline content${where} and no template of "${type}"${where}; nothing will be delivered. ` +
    `Add inline content (e.g. "email": {"subject", "html"}) or create a template for "${type}".`
  );
}
