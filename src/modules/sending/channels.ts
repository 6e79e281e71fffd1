import type { Channel } from '../../http/schemas.js';

/** The channels a send can reach, with their log name and the body key of their inline content. */
export const SEND_CHANNELS = [
  { channel: 'EMAIL', log: 'email', body: 'email' },
  { channel: 'INAPP_WEB', log: 'inapp', body: 'inapp' },
  { channel: 'SMS', log: 'sms', body: 'sms' },
  { channel: 'CALL', log: 'call', body: 'call' },
  { channel: 'PUSH', log: 'mobile_push', body: 'mobile_push' },
  { channel: 'WEB_PUSH', log: 'web_push', body: 'web_push' },
  { channel: 'SLACK', log: 'slack', body: 'slack' },
] as const satisfies readonly { channel: Channel; log: string; body: string }[];

export type SendChannel = (typeof SEND_CHANNELS)[number]['channel'];
export type LogChannel = (typeof SEND_CHANNELS)[number]['log'];
export type ContentKey = (typeof SEND_CHANNELS)[number]['body'];

export function logNameOf(channel: SendChannel): LogChannel {
  return SEND_CHANNELS.find((c) => c.channel === channel)!.log;
}
