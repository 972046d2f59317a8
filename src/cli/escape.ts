/**
 * Output hygiene for the CLI. Ids, names and values come from files and servers other
 * processes write; printed raw, a name could carry a terminal escape (clear the screen,
 * rewrite earlier lines, set the window title) or a bidi override that makes a row read
 * as something else. Everything the CLI prints passes through here.
 */

// C0 controls, DEL, C1 controls (0x9b is a one-byte CSI), line and paragraph
// separators, bidi embeddings, overrides and isolates, and the BOM.
const UNSAFE =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: escaping them is the point.
  /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;
// The same, but keeping newline and tab, for whole blocks of text we composed.
const UNSAFE_IN_TEXT =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: escaping them is the point.
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;

function hex(c: string): string {
  const code = c.charCodeAt(0);
  return code <= 0xff
    ? `\\x${code.toString(16).padStart(2, '0')}`
    : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * One value (an id, a name, a path) made safe to print on one line: every control,
 * separator and bidi character becomes a visible `\xNN` or `\uNNNN`, and a backslash
 * is doubled so the escaped form is unambiguous.
 */
export function escapeText(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(UNSAFE, hex);
}

/**
 * A message made safe for one line of standard error: whitespace runs with newlines
 * folded to one space, every other unsafe character escaped. Backslashes are kept as
 * they are (library messages quote values with JSON, whose escapes they are).
 */
export function messageLine(message: string): string {
  const folded = message
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .join(' ');
  return folded.replace(UNSAFE, hex);
}

/**
 * A whole block of text the CLI composed (a table, a script): newlines and tabs kept,
 * every other unsafe character escaped. A last guard for text already built from
 * escaped values; backslashes are left as they are.
 */
export function guardText(text: string): string {
  return text.replace(UNSAFE_IN_TEXT, hex);
}

/**
 * JSON for `--json` output: two-space indented, ending with a newline. `JSON.stringify`
 * escapes C0 controls but leaves DEL, C1 and bidi characters raw; they are escaped here
 * as `\uNNNN`, which is the same string to any JSON reader.
 */
export function jsonText(value: unknown): string {
  return `${JSON.stringify(value, null, 2).replace(
    UNSAFE_IN_TEXT,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )}\n`;
}
