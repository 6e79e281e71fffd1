import { randomBytes } from 'node:crypto';
import net from 'node:net';

/** A close frame as the server sent it. */
export interface CloseFrame {
  code: number | undefined;
  reason: string;
}

/**
 * A websocket client on a bare TCP socket: it completes the opening handshake and then writes
 * only what a test gives it. It never answers a close frame and never closes on its own, as an
 * unresponsive or hostile peer would; it records the close frame the server sends, and whether
 * that frame came before the server cut the connection.
 */
export class RawWebsocket {
  /** The server's close frame; undefined if the connection ended without one. */
  readonly closeFrame: Promise<CloseFrame | undefined>;
  /** The TCP connection ended (by the server: this client never ends it). */
  readonly ended: Promise<void>;
  private received = Buffer.alloc(0);
  private onCloseFrame: (frame: CloseFrame | undefined) => void = () => undefined;

  private constructor(readonly socket: net.Socket) {
    this.closeFrame = new Promise((resolve) => (this.onCloseFrame = resolve));
    this.ended = new Promise((resolve) => socket.once('close', () => resolve()));
    // A server that terminates may reset the connection: its end is read from 'close'.
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
      this.readFrames();
    });
    // A connection that ends without a close frame resolves it as undefined (a settled promise ignores this).
    socket.once('close', () => this.onCloseFrame(undefined));
  }

  /** Connects to 127.0.0.1:`port` and upgrades `path`; rejects unless the server answers 101. */
  static open(port: number, path: string): Promise<RawWebsocket> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: '127.0.0.1', port });
      let head = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        socket.off('data', onData);
        socket.off('error', reject);
        const status = head.subarray(0, end).toString('latin1').split('\r\n')[0];
        if (!status.startsWith('HTTP/1.1 101')) {
          socket.destroy();
          reject(new Error(`upgrade refused: ${status}`));
          return;
        }
        const client = new RawWebsocket(socket);
        // Bytes after the handshake answer are the first frames.
        const rest = head.subarray(end + 4);
        if (rest.length > 0) socket.emit('data', rest);
        resolve(client);
      };
      socket.on('data', onData);
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.write(
          [
            `GET ${path} HTTP/1.1`,
            'Host: 127.0.0.1',
            'Connection: Upgrade',
            'Upgrade: websocket',
            'Sec-WebSocket-Version: 13',
            `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
            '',
            '',
          ].join('\r\n'),
        );
      });
    });
  }

  /** Writes bytes as they are (a test builds its frames, valid or not). */
  write(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  /** Releases the socket at the end of a test, whatever state it is in. */
  destroy(): void {
    this.socket.destroy();
  }

  /** Reads the server's frames (never masked) as far as they have arrived; only a close frame matters here. */
  private readFrames(): void {
    for (;;) {
      const buf = this.received;
      if (buf.length < 2) return;
      let length = buf[1] & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buf.length < 4) return;
        length = buf.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buf.length < 10) return;
        length = Number(buf.readBigUInt64BE(2));
        offset = 10;
      }
      if (buf.length < offset + length) return;
      const payload = buf.subarray(offset, offset + length);
      this.received = buf.subarray(offset + length);
      if ((buf[0] & 0x0f) === 0x8) {
        this.onCloseFrame({ code: payload.length >= 2 ? payload.readUInt16BE(0) : undefined, reason: payload.subarray(2).toString('utf8') });
      }
    }
  }
}

/** A client frame (FIN set) with `payload` masked, as a client must send it. */
export function maskedFrame(opcode: number, payload: Buffer): Buffer {
  if (payload.length >= 126) throw new Error('maskedFrame builds short frames only');
  const mask = randomBytes(4);
  const masked = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]));
  return Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | payload.length]), mask, masked]);
}
