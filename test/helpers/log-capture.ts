import { Writable } from 'node:stream';
import pino from 'pino';

/** A pino logger whose JSON lines a test reads back (parsed), with the server's redaction. */
export function captureLogs(level = 'info'): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}
