import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { lazyChildLogger } from '../../src/http/request-logger.js';

function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  const logger = pino({ level, redact: { paths: ['apiKey'], censor: '[redacted]' } }, stream);
  return { logger, lines };
}

describe('lazyChildLogger', () => {
  it('builds no pino child for a request that logs nothing at an enabled level', () => {
    const { logger } = capture('warn');
    const child = vi.spyOn(logger, 'child');
    const log = lazyChildLogger(logger, { trackingId: 't-1' }, {});
    log.info('incoming request');
    log.debug('details');
    expect(child).not.toHaveBeenCalled();
  });

  it('writes enabled lines through a child bound to the request, with the parent redaction', async () => {
    const { logger, lines } = capture('info');
    const log = lazyChildLogger(logger, { trackingId: 't-2' }, {});
    log.info({ apiKey: 'clarion_sk_secret' }, 'first');
    log.error('second');
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => [l.msg, l.trackingId, l.level])).toEqual([
      ['first', 't-2', 30],
      ['second', 't-2', 50],
    ]);
    expect(lines[0].apiKey).toBe('[redacted]');
  });

  it('gives a route with its own level the real child at once', () => {
    const { logger } = capture('warn');
    const log = lazyChildLogger(logger, { trackingId: 't-3' }, { level: 'debug' });
    expect(log.level).toBe('debug');
  });
});
