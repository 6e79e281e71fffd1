// The MIME thread (mime-builder.ts): builds (and signs, given a DKIM key) each message it is sent, with buildMime.
import { parentPort } from 'node:worker_threads';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { DkimSigner } from './dkim.js';
import { type FromBuilder, type ToBuilder, buildMime } from './mime-builder.js';

const port = parentPort!;
/** The thread's one signer: it keeps the keys it parsed for the mails that follow. */
const signer = new DkimSigner();

/** Buffers arrive as Uint8Arrays (structured clone); MailComposer reads Buffers. */
function withBuffers(options: Mail.Options): Mail.Options {
  const attachments = options.attachments?.map((a) => {
    const content: unknown = a.content;
    return content instanceof Uint8Array && !Buffer.isBuffer(content) ? { ...a, content: Buffer.from(content.buffer, content.byteOffset, content.byteLength) } : a;
  });
  return attachments ? { ...options, attachments } : options;
}

async function build(msg: FromBuilder): Promise<void> {
  try {
    const { envelope, raw } = await buildMime(withBuffers(msg.options), msg.dkim, signer);
    // A copy of exactly the message's bytes, whose memory moves to the main thread instead of being copied again.
    const bytes = new Uint8Array(raw).buffer;
    port.postMessage({ id: msg.id, ok: true, envelope, raw: bytes } satisfies ToBuilder, [bytes]);
  } catch (err) {
    const e = err as Error & { code?: string };
    port.postMessage({ id: msg.id, ok: false, message: e.message ?? String(err), ...(e.code ? { code: e.code } : {}) } satisfies ToBuilder);
  }
}

/**
 * One message built at a time, in the order they came. A run hands the thread a batch of mails
 * at once, and started together their builds (MailComposer streams, stepping by setImmediate)
 * interleave: every one held its MIME tree until the last was done, so most of that garbage
 * outlived two young-generation collections and was promoted, and the first mail of the batch
 * waited for the whole batch's building. One at a time, each mail goes back as soon as it is
 * built and its garbage dies young.
 */
let building: Promise<void> = Promise.resolve();
port.on('message', (msg: FromBuilder) => {
  building = building.then(() => build(msg));
});
port.postMessage({ id: 0, ready: true } satisfies ToBuilder);
