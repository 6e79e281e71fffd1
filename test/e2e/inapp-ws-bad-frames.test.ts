import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { captureLogs } from '../helpers/log-capture.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { RawWebsocket, maskedFrame } from './inapp-ws-raw-client.js';

const MASK = Buffer.from([1, 2, 3, 4]);
/** A frame header with a 64-bit payload length and a mask, and no payload: the server refuses it on the header. */
const longFrame = (length: bigint) => {
  const header = Buffer.alloc(10);
  header[0] = 0x82;
  header[1] = 0x80 | 127;
  header.writeBigUInt64BE(length, 2);
  return Buffer.concat([header, MASK]);
};

/** Frames no client may send, the close code RFC 6455 (and ws) answer them with, and ws's error code. */
const BAD_FRAMES: Array<{ name: string; frame: Buffer; closeCode: number; wsCode: string }> = [
  { name: 'an unmasked frame', frame: Buffer.from([0x81, 0x02, 0x68, 0x69]), closeCode: 1002, wsCode: 'WS_ERR_EXPECTED_MASK' },
  { name: 'a reserved opcode (3)', frame: maskedFrame(0x3, Buffer.alloc(0)), closeCode: 1002, wsCode: 'WS_ERR_INVALID_OPCODE' },
  { name: 'RSV1 set without compression', frame: Buffer.concat([Buffer.from([0xc1, 0x80]), MASK]), closeCode: 1002, wsCode: 'WS_ERR_UNEXPECTED_RSV_1' },
  { name: 'a 2^63 byte length', frame: longFrame(2n ** 63n), closeCode: 1009, wsCode: 'WS_ERR_UNSUPPORTED_DATA_PAYLOAD_LENGTH' },
  { name: 'invalid UTF-8 in a text frame', frame: maskedFrame(0x1, Buffer.from([0xc3, 0x28])), closeCode: 1007, wsCode: 'WS_ERR_INVALID_UTF8' },
  { name: 'a frame over the 64 KiB limit', frame: longFrame(64n * 1024n + 1n), closeCode: 1009, wsCode: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' },
];

describe.each(STORAGE_KINDS)('in-app websocket: frames a client may not send (%s)', (kind) => {
  let t: TestContext;
  let port: number;
  // Debug, so the test also sees the line each refused frame is logged with.
  const logs = captureLogs('debug');

  beforeAll(async () => {
    t = await createTestContext(kind, { logger: logs.logger });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    port = address.port;
  });
  afterAll(async () => {
    await t.close();
  });

  it.each(BAD_FRAMES)('closes on $name with $closeCode and logs it at debug, not as an error', async ({ frame, closeCode, wsCode }) => {
    // Each case reads only its own lines (the previous socket's were written before it was cut off).
    logs.lines.splice(0);
    const userId = `bad-${randomUUID()}`;
    const socket = await RawWebsocket.open(port, `/?envId=${t.account.clientId}&userId=${userId}`);
    try {
      socket.write(frame);
      expect((await socket.closeFrame)?.code).toBe(closeCode);
      await socket.ended;
    } finally {
      socket.destroy();
    }
    // A client's bad frame is the client's fault: anyone who can open a socket could otherwise fill the error log.
    expect(logs.lines.filter((line) => (line.level as number) >= 50)).toEqual([]);
    expect(logs.lines.filter((line) => JSON.stringify(line).includes('"stack"'))).toEqual([]);
    expect(logs.lines.some((line) => line.level === 20 && line.wsCode === wsCode)).toBe(true);
  });
});
