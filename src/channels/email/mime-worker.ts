// The MIME thread (mime-builder.ts): builds (and signs, given a DKIM key) each message it is sent, as buildMime does.
import { parentPort } from 'node:worker_threads';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { DkimSigner } from './dkim.js';
import { type BuiltMime, type FromBuilder, type ToBuilder, composeMime, signMime } from './mime-builder.js';

const port = parentPort!;
// Errors leave this thread as their message and code (fail below), never with a stack, so none is
// captured: Node 20's stream.pipeline, which MailComposer runs for every part of every mail,
// aborts its AbortController when it finishes, and the AbortError (a DOMException) it makes took
// some 4% of this thread's CPU, most of it capturing the stack.
Error.stackTraceLimit = 0;
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

function post(id: number, built: BuiltMime): void {
  // A copy of exactly the message's bytes, whose memory moves to the main thread instead of being copied again.
  const bytes = new Uint8Array(built.raw).buffer;
  port.postMessage({ id, ok: true, envelope: built.envelope, raw: bytes } satisfies ToBuilder, [bytes]);
}

function fail(id: number, err: unknown): void {
  const e = err as Error & { code?: string };
  port.postMessage({ id, ok: false, message: e.message ?? String(err), ...(e.code ? { code: e.code } : {}) } satisfies ToBuilder);
}

/**
 * One message composed at a time, in the order they came. A run hands the thread a batch of
 * mails at once, and started together their builds (MailComposer streams, stepping by
 * setImmediate) interleave: every one held its MIME tree until the last was done, so most of
 * that garbage outlived two young-generation collections and was promoted, and the first mail of
 * the batch waited for the whole batch's building. One at a time, each mail goes back as soon as
 * it is built and its garbage dies young. Its DKIM signature is computed on libuv's thread pool
 * (DkimSigner.sign) while the next mail is composed.
 */
let composing: Promise<unknown> = Promise.resolve();
port.on('message', (msg: FromBuilder) => {
  const composed = composing.then(() => composeMime(withBuffers(msg.options)));
  composing = composed.catch(() => undefined);
  composed
    .then((built) => signMime(built, msg.dkim, signer))
    .then(
      (built) => post(msg.id, built),
      (err: unknown) => fail(msg.id, err),
    );
});
port.postMessage({ id: 0, ready: true } satisfies ToBuilder);
