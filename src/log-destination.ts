import pino from 'pino';

/** What the asynchronous stdout writer may hold while stdout does not drain. */
const LOG_BUFFER_MAX_BYTES = 16 * 1024 * 1024;

/** Where the process's log lines go: the logger's stream, and the per-request lines' own way in. */
export interface LogDestination {
  stream: LineSink;
  /** One request line (src/http/request-logger.ts), handed to `stream` with the others of its turn. */
  requestLine: (line: string) => void;
}

/**
 * stdout as pino.destination builds it (sonic-boom, asynchronous, flushed by pino's exit hook),
 * in buffer mode, each handover a Buffer. In its default text mode sonic-boom measures the byte
 * length of all the text gathered so far on every line (up to 16 KB while a write is in flight,
 * so each line rescans and flattens the lines before it): under load that was about half of
 * what the request line cost (issue 11: POST /send at info, API process, CPU per request 51.1 ->
 * 48.8 µs in the same rounds, bare route 19.7).
 *
 * Request lines, one per request at the default level, are gathered for the rest of the event
 * loop's turn and handed over as one Buffer. sonic-boom starts an fs.write (a hop through libuv's
 * thread pool, about 18 µs of CPU measured for a 300-byte line into a pipe) whenever it is idle,
 * so under load nearly every request line paid one; a turn answers many requests at once (a
 * group commit resolves them together). Any other line first hands over the gathered request
 * lines, so lines keep their order, and the logger's own lines (shutdown, fatal errors) are
 * never held back. A process that exits in the same turn as a request completes, without
 * logging anything after it, loses that turn's request lines; a shutdown logs after its last
 * request.
 */
export function stdoutDestination(): LogDestination {
  // maxLength: a stdout that stops reading (a stalled log collector) must not grow this process's
  // memory without bound; past 16 MB waiting, new lines are dropped (log lines, never messages).
  return gatheringDestination(pino.destination({ dest: 1, sync: false, contentMode: 'buffer', maxLength: LOG_BUFFER_MAX_BYTES }));
}

/** The sonic-boom stream (in buffer mode) the lines are handed to; see stdoutDestination. */
export type LineSink = Pick<pino.DestinationStream, 'write'> & { flush(cb?: (err?: Error) => void): void; flushSync(): void };

/** Log lines into `out`, request lines gathered per event loop turn (see stdoutDestination). */
export function gatheringDestination(out: LineSink): LogDestination {
  let gathered: string[] = [];
  const handOver = () => {
    if (gathered.length === 0) return;
    const text = gathered.length === 1 ? gathered[0] : gathered.join('');
    gathered = [];
    out.write(Buffer.from(text) as unknown as string);
  };
  const stream = {
    write: (line: string) => {
      handOver();
      out.write(Buffer.from(line) as unknown as string);
    },
    flush: (cb?: (err?: Error) => void) => {
      handOver();
      out.flush(cb);
    },
    flushSync: () => {
      handOver();
      out.flushSync();
    },
  };
  return {
    stream,
    requestLine: (line) => {
      if (gathered.push(line) === 1) setImmediate(handOver);
    },
  };
}
