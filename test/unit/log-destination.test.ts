// The process's log destination (src/log-destination.ts): request lines handed over once per
// event loop turn, other lines at once and in order.
import { describe, expect, it } from 'vitest';
import { type LineSink, gatheringDestination } from '../../src/log-destination.js';

/** A sink that records each handover, as sonic-boom would start one write for it when idle. */
function recordingSink() {
  const writes: string[] = [];
  const flushes: string[] = [];
  const sink: LineSink = {
    write: (data: string) => void writes.push(String(data)),
    flush: () => void flushes.push('flush'),
    flushSync: () => void flushes.push('flushSync'),
  };
  return { sink, writes, flushes };
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('gatheringDestination', () => {
  it('hands the request lines of one turn over together, after the turn', async () => {
    const { sink, writes } = recordingSink();
    const destination = gatheringDestination(sink);
    for (let i = 0; i < 50; i++) destination.requestLine(`{"n":${i}}\n`);
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toHaveLength(1);
    expect(writes[0].split('\n').slice(0, -1).map((l) => (JSON.parse(l) as { n: number }).n)).toEqual(Array.from({ length: 50 }, (_, i) => i));

    destination.requestLine('{"n":50}\n');
    await nextTurn();
    expect(writes).toEqual([writes[0], '{"n":50}\n']);
  });

  it('writes the logger’s own lines at once, after the request lines gathered before them', async () => {
    const { sink, writes } = recordingSink();
    const destination = gatheringDestination(sink);
    destination.requestLine('request 1\n');
    destination.requestLine('request 2\n');
    destination.stream.write('shutting down\n');
    expect(writes).toEqual(['request 1\nrequest 2\n', 'shutting down\n']);
    destination.requestLine('request 3\n');
    await nextTurn();
    expect(writes).toEqual(['request 1\nrequest 2\n', 'shutting down\n', 'request 3\n']);
  });

  it('hands the gathered lines over before a flush, synchronous or not', () => {
    const { sink, writes, flushes } = recordingSink();
    const destination = gatheringDestination(sink);
    destination.requestLine('before exit\n');
    destination.stream.flushSync();
    expect(writes).toEqual(['before exit\n']);
    destination.requestLine('before flush\n');
    destination.stream.flush();
    expect(writes).toEqual(['before exit\n', 'before flush\n']);
    expect(flushes).toEqual(['flushSync', 'flush']);
  });
});
