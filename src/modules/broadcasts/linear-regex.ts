import { RE2JS } from 're2js';

const FLAG_BITS: Record<string, number> = { i: RE2JS.CASE_INSENSITIVE, m: RE2JS.MULTILINE, s: RE2JS.DOTALL };

/** The part of RegExp that mingo's $regex uses: exec, truthy on a match. */
export interface LinearRegex {
  readonly source: string;
  readonly flags: string;
  exec(input: string): [string] | null;
}

/**
 * A JavaScript regular expression (its source and flags i, m, s) run by RE2's engine (re2js):
 * matching takes time linear in the input whatever the pattern, so a filter written to
 * backtrack (`^(\w|\d)*$` on a long value: seconds per user, doubling with each character)
 * cannot hold the process. Throws on what RE2 does not run (lookaround, backreferences) with
 * re2js's reason.
 */
export function linearRegex(source: string, flags: string): LinearRegex {
  let bits = 0;
  for (const flag of flags) bits |= FLAG_BITS[flag] ?? 0;
  const compiled = RE2JS.compile(RE2JS.translateRegExp(source), bits);
  return {
    source,
    flags,
    exec: (input) => (compiled.test(input) ? [input] : null),
  };
}
