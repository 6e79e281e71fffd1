import { createRequire } from 'node:module';
import { type FormatCallback, type HtmlToTextOptions, compile } from 'html-to-text';
import type * as Htmlparser2 from 'htmlparser2';

// The text part, read from the HTML in bounded time. html-to-text, and the htmlparser2 it parses
// with, are far worse than linear on some HTML, and the HTML is the sender's (up to 2,000,000
// characters per send; inbound mail is converted here too): a data table's layout transposes a
// square of its larger side (a one-row table of 180,000 cells, 1.8 MB, held the event loop 87 s),
// the parser looks for the element of an end tag through all the elements open (32 KB of end tags
// of elements not open, under 5,000 that are: 250 ms), a word glued together from many elements
// is copied whole at each one, and every level of nesting copies (and, in a quote or a list,
// rewrites) the text inside it. Ordinary mail is far from all of these. So tables are laid out
// within a budget (boundedDataTable), nesting is read to MAX_DEPTH levels, and the HTML is
// converted up to where an estimate of the conversion's time (ConversionMeter) reaches
// PLAIN_TEXT_BUDGET_NS: a prefix of the document, whose text ends with a line "...". html-to-text's
// own limits do not bound these: maxInputLength would have to be some 16 KB, short of ordinary
// newsletters (and it warns on the console), and maxChildNodes leaves the parser's and the glued
// word's costs as they are.

/** Characters of HTML read at most (inbound mail's can be megabytes). */
export const PLAIN_TEXT_MAX_HTML = 1024 * 1024;
/** The estimated time a conversion may take (ns): ordinary HTML up to some hundreds of KB is read whole. */
export const PLAIN_TEXT_BUDGET_NS = 50_000_000;
/** Elements nested deeper are left out of the text (html-to-text's limits.maxDepth; its walk recurses per level). */
const MAX_DEPTH = 64;
/**
 * What the parts of a conversion cost (ns; html-to-text 9.0.5 on Node 20, about the most each kind
 * of element or character took, measured over thousands of them).
 */
const COST = {
  element: 5000,
  /** A link (its formatter collects its text to compare with the href) and a quote (rewritten line by line). */
  heavyElement: 10_000,
  attribute: 500,
  /** A comment, CDATA section, declaration or processing instruction (a node the text leaves out). */
  otherNode: 600,
  entity: 300,
  /** Per character of text, or of an attribute whose value goes into the text (href, src, alt). */
  textChar: 40,
  /** Per character of text and level of nesting it is at: each level copies it; a quote or a list rewrites it. */
  textCharPerLevel: 8,
  /**
   * Per element open when the parser meets an end tag whose element is not: it looked through them
   * all (up to 8 ns each), in the metering parse and again in the conversion's.
   */
  unmatchedEndPerLevel: 16,
  /** Per character of a word glued on to (no whitespace between two texts): html-to-text copies the word again. */
  gluedChar: 3,
};
const HEAVY_ELEMENTS = new Set(['a', 'blockquote']);
/** html-to-text's whitespace (its whitespaceCharacters option): the characters between words. */
const isWhitespace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || c === 0x0c || c === 0x200b;
/**
 * Elements html-to-text makes a block of (or a line break) with its default formats and ours: a
 * word does not go on across them. Table cells are blocks of a data table but inline by default.
 */
const BLOCKS = new Set(['article', 'aside', 'blockquote', 'br', 'div', 'footer', 'form', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'header', 'hr', 'main', 'nav', 'ol', 'p', 'pre', 'table', 'ul']);

/** Thrown through the parser to stop it; made once (no stack captured per conversion). */
const OVER_BUDGET = new Error('over the conversion budget');

/**
 * The estimate of a conversion's time, charged token by token (MeteredParser) and told of the
 * elements the parser opens and closes (as htmlparser2's handler). Over budget, it throws
 * OVER_BUDGET with `cut` at the start of the token that went over.
 */
class ConversionMeter {
  cost = 0;
  cut = -1;
  /** Where the token being read starts (its `<`). */
  tokenStart = 0;
  /** Elements open, and how many were ever opened and closed. */
  depth = 0;
  opened = 0;
  closed = 0;
  /** Whether the attribute being read goes into the text. */
  textAttribute = false;
  /** Length of the word being glued together. */
  private run = 0;

  constructor(
    readonly html: string,
    readonly budget: number,
  ) {}

  onopentagname(name: string): void {
    this.depth++;
    this.opened++;
    if (BLOCKS.has(name)) this.run = 0;
    this.charge(HEAVY_ELEMENTS.has(name) ? COST.heavyElement : COST.element, this.tokenStart);
  }

  onclosetag(name: string): void {
    this.depth--;
    this.closed++;
    if (BLOCKS.has(name)) this.run = 0;
  }

  charge(ns: number, at: number): void {
    this.cost += ns;
    if (this.cost <= this.budget) return;
    this.cut = at;
    throw OVER_BUDGET;
  }

  private perChar(): number {
    return COST.textChar + COST.textCharPerLevel * Math.min(this.depth, MAX_DEPTH);
  }

  /** The text html[start, end): its characters at this depth, and the word it glues on to. */
  text(start: number, end: number): void {
    const { html } = this;
    let first = start;
    while (first < end && !isWhitespace(html.charCodeAt(first))) first++;
    const glued = first > start && this.run > 0 ? this.run + first - start : 0;
    if (first === end) this.run += end - start;
    else {
      let last = end - 1;
      while (!isWhitespace(html.charCodeAt(last))) last--;
      this.run = end - 1 - last;
    }
    const perChar = this.perChar();
    // Over budget inside the text: cut there (not between the halves of a surrogate pair).
    let at = Math.min(end, start + Math.max(0, Math.floor((this.budget - this.cost - glued * COST.gluedChar) / perChar)));
    if (at > start && (html.charCodeAt(at - 1) & 0xfc00) === 0xd800) at--;
    this.charge(glued * COST.gluedChar + (end - start) * perChar, at);
  }

  entity(codePoint: number, at: number): void {
    const glued = this.run > 0 && !isWhitespace(codePoint) ? this.run + 1 : 0;
    this.run = isWhitespace(codePoint) ? 0 : this.run + 1;
    this.charge(COST.entity + glued * COST.gluedChar, at);
  }

  /** Characters of an attribute's value (an element's, cut before it). */
  attributeValue(chars: number): void {
    if (this.textAttribute) this.charge(chars * this.perChar(), this.tokenStart);
  }
}

/** The attributes html-to-text's formats put into the text: a link's href, an image's src and alt. */
function isTextAttribute(html: string, start: number, end: number): boolean {
  if (end - start !== 3 && end - start !== 4) return false;
  const name = html.slice(start, end).toLowerCase();
  return name === 'href' || name === 'src' || name === 'alt';
}

/**
 * htmlparser2's parser, charging the meter for each token before it is handled. The htmlparser2
 * html-to-text parses with (its dependency, not Clarion's), loaded at the first metered
 * conversion: a CommonJS copy of it, some 440 KB of heap, that most processes never need.
 */
const defineMeteredParser = () => {
  const { Parser } = createRequire(createRequire(import.meta.url).resolve('html-to-text'))('htmlparser2') as typeof Htmlparser2;
  return class MeteredParser extends Parser {
    constructor(private readonly meter: ConversionMeter) {
      super(meter, { decodeEntities: true });
    }

    override onopentagname(start: number, endIndex: number): void {
      this.meter.tokenStart = this.startIndex;
      super.onopentagname(start, endIndex);
    }

    override onattribname(start: number, endIndex: number): void {
      const { meter } = this;
      meter.charge(COST.attribute, meter.tokenStart);
      meter.textAttribute = isTextAttribute(meter.html, start, endIndex);
      super.onattribname(start, endIndex);
    }

    override onattribdata(start: number, endIndex: number): void {
      this.meter.attributeValue(endIndex - start);
      super.onattribdata(start, endIndex);
    }

    override onattribentity(codePoint: number): void {
      this.meter.attributeValue(1);
      super.onattribentity(codePoint);
    }

    override onclosetag(start: number, endIndex: number): void {
      const { meter } = this;
      const { depth, opened, closed } = meter;
      meter.tokenStart = this.startIndex;
      super.onclosetag(start, endIndex);
      // An end tag whose element is open closes it and what is open inside it (paid for as they
      // opened); one whose element is not had the parser look through every open element (and
      // `</p>` and `</br>` then open one of their own).
      if (meter.opened !== opened || meter.closed === closed) meter.charge(COST.unmatchedEndPerLevel * depth, meter.tokenStart);
    }

    override ontext(start: number, endIndex: number): void {
      this.meter.text(start, endIndex);
      super.ontext(start, endIndex);
    }

    override ontextentity(codePoint: number): void {
      this.meter.entity(codePoint, this.startIndex);
      super.ontextentity(codePoint);
    }

    override oncomment(start: number, endIndex: number, offset: number): void {
      this.meter.charge(COST.otherNode, this.startIndex);
      super.oncomment(start, endIndex, offset);
    }

    override oncdata(start: number, endIndex: number, offset: number): void {
      this.meter.charge(COST.otherNode, this.startIndex);
      super.oncdata(start, endIndex, offset);
    }

    override ondeclaration(start: number, endIndex: number): void {
      this.meter.charge(COST.otherNode, this.startIndex);
      super.ondeclaration(start, endIndex);
    }

    override onprocessinginstruction(start: number, endIndex: number): void {
      this.meter.charge(COST.otherNode, this.startIndex);
      super.onprocessinginstruction(start, endIndex);
    }
  }
};
let MeteredParser: ReturnType<typeof defineMeteredParser> | undefined;

function occurrences(html: string, char: string): number {
  let n = 0;
  for (let i = html.indexOf(char); i >= 0; i = html.indexOf(char, i + 1)) n++;
  return n;
}

/** The `>` followed by a character that can start a word: where a text after a tag, comment or end tag may glue on to a word. */
function wordStartsAfterTags(html: string): number {
  let n = 0;
  for (let i = html.indexOf('>'); i >= 0; i = html.indexOf('>', i + 1)) {
    if (i + 1 < html.length && html[i + 1] !== '<' && !isWhitespace(html.charCodeAt(i + 1))) n++;
  }
  return n;
}

/**
 * The most the meter could charge for `html`, from its length and some of its characters alone:
 * every tag, end tag or comment starts with a `<`, every entity with a `&`, an attribute takes two
 * characters at least, a text or an attribute value is at most all of it, and a text can glue on
 * to a word only where it starts: after a `>` or an entity. HTML under budget by this bound (nearly
 * all transactional mail, a 20 KB newsletter) is converted without the metering parse.
 */
function worstCase(html: string): number {
  const tags = occurrences(html, '<');
  const entities = occurrences(html, '&');
  const perChar = COST.textChar + COST.textCharPerLevel * Math.min(tags, MAX_DEPTH);
  const glues = wordStartsAfterTags(html) + 2 * entities + 1;
  return tags * (COST.heavyElement + COST.unmatchedEndPerLevel * tags) + entities * COST.entity + html.length * (COST.attribute / 2 + perChar + glues * COST.gluedChar);
}

/** How much of `html` (up to PLAIN_TEXT_MAX_HTML) converts within `budget`. */
export function convertibleLength(html: string, budget = PLAIN_TEXT_BUDGET_NS): number {
  let max = PLAIN_TEXT_MAX_HTML;
  if ((html.charCodeAt(max - 1) & 0xfc00) === 0xd800) max--;
  const source = html.length > max ? html.slice(0, max) : html;
  if (worstCase(source) <= budget) return source.length;
  const meter = new ConversionMeter(source, budget);
  try {
    MeteredParser ??= defineMeteredParser();
    new MeteredParser(meter).end(source);
  } catch (err) {
    if (err !== OVER_BUDGET) throw err;
    return meter.cut;
  }
  return source.length;
}

/** Data-table layouts a conversion may do, in cells of the squares it transposes (about 4 ns each). */
const TABLE_LAYOUT_BUDGET = 1_000_000;
/** The most a cell may span: beyond, the layout loops over spans it cannot show (browsers cap colspan at 1,000). */
const MAX_SPAN = 1000;
/** thead, tbody, tfoot and center inside one another, as html-to-text's data table reads them (recursively). */
const TABLE_SECTIONS = new Set(['thead', 'tbody', 'tfoot', 'center']);
const MAX_SECTION_DEPTH = 8;
/** The table layout budget left to each conversion (keyed by its builder). */
const tableBudgets = new WeakMap<object, number>();

type Node = Parameters<FormatCallback>[0];
const cellsOf = (row: Node) => row.children.filter((c) => c.type === 'tag' && (c.name === 'td' || c.name === 'th'));

/** A table's rows as html-to-text's data table reads them; undefined when its sections nest deeper than it should recurse. */
function tableRows(table: Node): Node[] | undefined {
  const rows: Node[] = [];
  const visit = (nodes: Node[], depth: number): boolean => {
    for (const node of nodes) {
      if (node.type !== 'tag') continue;
      if (node.name === 'tr') rows.push(node);
      else if (TABLE_SECTIONS.has(node.name ?? '') && (depth >= MAX_SECTION_DEPTH || !visit(node.children, depth + 1))) return false;
    }
    return true;
  };
  return visit(table.children, 0) ? rows : undefined;
}

/** A span as html-to-text reads it (`+value || 1`), when it is a whole number up to MAX_SPAN. */
function span(cell: Node, name: 'colspan' | 'rowspan'): number | undefined {
  const value = Number((cell.attribs as Record<string, string> | undefined)?.[name]) || 1;
  // A fraction or a negative rowspan has its row offsets recurse until the stack overflows.
  return Number.isInteger(value) && value >= 1 && value <= MAX_SPAN ? value : undefined;
}

/**
 * What html-to-text's layout of these rows costs: the cells their spans fill, and the square of
 * the table's larger side, which it transposes. Infinite for spans out of range.
 */
function layoutCost(rows: Node[]): number {
  let filled = 0;
  let width = 0;
  let height = rows.length;
  /** Columns taken by cells spanning rows below theirs. */
  let carried = 0;
  for (let y = 0; y < rows.length; y++) {
    let rowWidth = 0;
    for (const cell of cellsOf(rows[y])) {
      const colspan = span(cell, 'colspan');
      const rowspan = span(cell, 'rowspan');
      if (colspan === undefined || rowspan === undefined) return Number.POSITIVE_INFINITY;
      rowWidth += colspan;
      filled += colspan * rowspan;
      if (rowspan > 1) {
        carried += colspan;
        height = Math.max(height, y + rowspan);
      }
    }
    width = Math.max(width, rowWidth);
  }
  const side = Math.max(height, width + carried);
  return filled + side * side;
}

/**
 * html-to-text's data table (columns aligned) while the conversion's layout budget lasts; past
 * it, or for spans out of range, each row on a line of its own, its cells' text one after the
 * other (linear in the table).
 */
const boundedDataTable: FormatCallback = (elem, walk, builder, formatOptions) => {
  const rows = tableRows(elem);
  const left = tableBudgets.get(builder) ?? TABLE_LAYOUT_BUDGET;
  const cost = rows ? layoutCost(rows) : Number.POSITIVE_INFINITY;
  if (cost <= left) {
    tableBudgets.set(builder, left - cost);
    builder.options.formatters.dataTable(elem, walk, builder, formatOptions);
    return;
  }
  const upper = formatOptions.uppercaseHeaderCells !== false;
  builder.openBlock({ leadingLineBreaks: formatOptions.leadingLineBreaks ?? 2 });
  for (const row of rows ?? []) {
    builder.openBlock({ leadingLineBreaks: 1 });
    for (const cell of cellsOf(row)) {
      if (upper && cell.name === 'th') builder.pushWordTransform((s) => s.toUpperCase());
      walk(cell.children, builder);
      if (upper && cell.name === 'th') builder.popWordTransform();
      // Whitespace: the next cell's text starts a word of its own.
      builder.addInline(' ');
    }
    builder.closeBlock({ trailingLineBreaks: 1 });
  }
  builder.closeBlock({ trailingLineBreaks: formatOptions.trailingLineBreaks ?? 2 });
};

/**
 * An html-to-text converter (compiled once: convert() re-processes its options on every call)
 * that reads at most convertibleLength(html) of the HTML, nesting to MAX_DEPTH levels, and has the
 * format `boundedDataTable` for tables. The text of a prefix ends with a line "...".
 */
export function boundedHtmlToText(options: HtmlToTextOptions): (html: string) => string {
  const convert = compile({ ...options, formatters: { ...options.formatters, boundedDataTable }, limits: { ...options.limits, maxDepth: MAX_DEPTH } });
  return (html) => {
    const length = convertibleLength(html);
    return length < html.length ? `${convert(html.slice(0, length)).trimEnd()}\n\n...` : convert(html);
  };
}

const toText = boundedHtmlToText({
  wordwrap: 100,
  selectors: [
    { selector: 'a', options: { hideLinkHrefIfSameAsText: true } },
    { selector: 'img', format: 'skip' },
    { selector: 'h1', options: { uppercase: false } },
    { selector: 'h2', options: { uppercase: false } },
    { selector: 'h3', options: { uppercase: false } },
    { selector: 'table', format: 'boundedDataTable' },
  ],
});

const TEXT_CACHE_ENTRIES = 256;
const TEXT_CACHE_MAX_HTML = 64 * 1024;

/** The text/plain alternative, read from the HTML (without the hidden preheader). */
export function htmlToPlainText(html: string): string {
  return toText(html).trim();
}

/**
 * htmlToPlainText with its recent conversions remembered: a broadcast or a busy type sends the
 * same rendered HTML many times. Each email provider owns one (no process-wide cache).
 */
export class PlainTextCache {
  private readonly entries = new Map<string, string>();

  convert(html: string): string {
    const cached = this.entries.get(html);
    if (cached !== undefined) return cached;
    const text = htmlToPlainText(html);
    if (html.length <= TEXT_CACHE_MAX_HTML) {
      if (this.entries.size >= TEXT_CACHE_ENTRIES) this.entries.delete(this.entries.keys().next().value as string);
      this.entries.set(html, text);
    }
    return text;
  }
}
