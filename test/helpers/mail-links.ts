import type { ReceivedMail } from './smtp-peer.js';

/** The href of every <a> of an HTML body, entities of `&` undone. */
export const hrefs = (html: string): string[] => [...html.matchAll(/<a\b[^>]*\shref=["']([^"']*)["']/g)].map((m) => m[1].replace(/&amp;/g, '&'));

/** The URL of the open-tracking pixel of an HTML body. */
export const pixelOf = (html: string): string | undefined => /<img src="([^"]+)" width="1" height="1"/.exec(html)?.[1]?.replace(/&amp;/g, '&');

/** The List-Unsubscribe header of a received mail, unfolded, with its https URL and mailto URI. */
export const unsubscribeUrls = (mail: ReceivedMail): { raw: string; https: string; mailto: string } => {
  // The raw header, unfolded (mailparser splits it into {url, mail}).
  const raw = /^List-Unsubscribe:(.*(?:\r\n[ \t].*)*)/im.exec(mail.raw.toString('utf8'))?.[1].replace(/\r\n[ \t]+/g, ' ').trim() ?? '';
  return { raw, https: /<(https:[^>]+)>/.exec(raw)?.[1] ?? '', mailto: /<(mailto:[^>]+)>/.exec(raw)?.[1] ?? '' };
};
