import type { SendBody } from './sending.schemas.js';

/**
 * The single-channel sends of the pingram SDK (`email.send`, `sms.send`, `sender.testEmail`) as
 * the send they are: one recipient by address, inline content, forced to its channel. They go
 * through the same acceptance as POST /send (intake, caps, idempotency, warnings).
 */

export interface EmailSendInput {
  type: string;
  to: string;
  subject: string;
  html: string;
  fromName?: string;
  fromAddress?: string;
  previewText?: string;
  replyToAddresses?: string[];
  ccAddresses?: string[];
  bccAddresses?: string[];
  attachments?: { filename: string; url: string }[];
  schedule?: string;
}

export function emailSend(input: EmailSendInput): SendBody {
  const options = {
    ...(input.fromAddress !== undefined ? { fromAddress: input.fromAddress } : {}),
    ...(input.fromName !== undefined ? { fromName: input.fromName } : {}),
    ...(input.replyToAddresses ? { replyToAddresses: input.replyToAddresses } : {}),
    ...(input.ccAddresses ? { ccAddresses: input.ccAddresses } : {}),
    ...(input.bccAddresses ? { bccAddresses: input.bccAddresses } : {}),
    ...(input.attachments ? { attachments: input.attachments } : {}),
  };
  return {
    type: input.type,
    to: { email: input.to },
    forceChannels: ['EMAIL'],
    email: { subject: input.subject, html: input.html, ...(input.previewText !== undefined ? { previewText: input.previewText } : {}) },
    ...(Object.keys(options).length > 0 ? { options: { email: options } } : {}),
    ...(input.schedule !== undefined ? { schedule: input.schedule } : {}),
  };
}

export interface SmsSendInput {
  type: string;
  to: string;
  message?: string;
  mediaUrls?: string[];
  schedule?: string;
  from?: string;
}

export function smsSend(input: SmsSendInput): SendBody {
  return {
    type: input.type,
    to: { number: input.to },
    forceChannels: ['SMS'],
    sms: {
      ...(input.message !== undefined ? { message: input.message } : {}),
      ...(input.mediaUrls ? { mediaUrls: input.mediaUrls } : {}),
      ...(input.from !== undefined ? { from: input.from } : {}),
    },
    ...(input.schedule !== undefined ? { schedule: input.schedule } : {}),
  };
}

/** `sender.testEmail`: an email of the type's content as the editor has it, to one address, from the given sender. */
export interface TestEmailInput {
  notificationId: string;
  to: string;
  subject: string;
  html: string;
  fromAddress: string;
  fromName: string;
  previewText?: string;
}

export function testEmailSend(input: TestEmailInput): SendBody {
  return emailSend({ type: input.notificationId, to: input.to, subject: input.subject, html: input.html, fromAddress: input.fromAddress, fromName: input.fromName, ...(input.previewText !== undefined ? { previewText: input.previewText } : {}) });
}
