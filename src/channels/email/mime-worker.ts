// The MIME thread (mime-builder.ts): builds each message it is sent with nodemailer's MailComposer.
import { parentPort } from 'node:worker_threads';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type Mail from 'nodemailer/lib/mailer/index.js';
import type { FromBuilder, ToBuilder } from './mime-builder.js';

const port = parentPort!;

/** Buffers arrive as Uint8Arrays (structured clone); MailComposer reads Buffers. */
function withBuffers(options: Mail.Options): Mail.Options {
  const attachments = options.attachments?.map((a) => {
    const content: unknown = a.content;
    return content instanceof Uint8Array && !Buffer.isBuffer(content) ? { ...a, content: Buffer.from(content.buffer, content.byteOffset, content.byteLength) } : a;
  });
  return attachments ? { ...options, attachments } : options;
}

port.on('message', (msg: FromBuilder) => {
  void (async () => {
    try {
      const mime = new MailComposer(withBuffers(msg.options)).compile();
      const envelope = mime.getEnvelope();
      const raw = await mime.build();
      // A copy of exactly the message's bytes, whose memory moves to the main thread instead of being copied again.
      const bytes = new Uint8Array(raw).buffer;
      port.postMessage({ id: msg.id, ok: true, envelope: { from: envelope.from || '', to: envelope.to }, raw: bytes } satisfies ToBuilder, [bytes]);
    } catch (err) {
      const e = err as Error & { code?: string };
      port.postMessage({ id: msg.id, ok: false, message: e.message ?? String(err), ...(e.code ? { code: e.code } : {}) } satisfies ToBuilder);
    }
  })();
});
port.postMessage({ id: 0, ready: true } satisfies ToBuilder);
