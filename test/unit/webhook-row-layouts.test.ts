import { describe, expect, it } from 'vitest';
import { ATTEMPT_ROW, DELIVERY_ROW, EVENT_ROW, type RowLayout } from '../../src/modules/webhooks/webhook-row-layouts.js';

/** A row whose every column holds a value of its own (its name), so a value written under another column shows. */
function distinctRow<Row>(layout: RowLayout<Row>): Row {
  return Object.fromEntries(layout.columns.map((c) => [c, `value of ${c}`])) as Row;
}

describe('webhook row layouts (the positional values of SQLite INSERTs)', () => {
  it.each([
    ['webhook_events', EVENT_ROW as RowLayout<unknown>],
    ['webhook_deliveries', DELIVERY_ROW as RowLayout<unknown>],
    ['webhook_attempts', ATTEMPT_ROW as RowLayout<unknown>],
  ])('%s: the writer puts each column value at its column position, from the given offset', (_table, layout) => {
    const row = distinctRow(layout) as Record<string, unknown>;
    const width = layout.columns.length;
    const into = new Array<unknown>(2 * width).fill('untouched');
    layout.write(row, into, width);
    expect(into.slice(0, width)).toEqual(new Array(width).fill('untouched'));
    expect(into.slice(width)).toEqual(layout.columns.map((c) => row[c]));
  });
});
