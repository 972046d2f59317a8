/**
 * The answers of cross-process combining (see `channel.ts`): the text of an
 * answer, the one file a holder stages its cycle's answers in before it
 * writes, and how each waiter gets its answer once the write is durable: the
 * staged file is hard-linked into the waiter's inbox as `<id>.ans` (no new
 * file per waiter), or, where links are not possible or nothing was staged,
 * the answer alone is created there.
 */
import { join } from 'node:path';
import { type LedgerFs, writeAll } from '../../fs.js';
import { type CombineReply, encodeReply, isObject } from '../../wire.js';
import type { LostRows } from '../lost.js';
import { createExclusive, readLedgerFile } from '../safe-fs.js';
import { type ClaimedRequest, inboxOf } from './channel.js';

/** The text of an answer file. */
export function encodeAnswer(reply: CombineReply, lost?: LostRows): string {
  return `${JSON.stringify({ v: 1, lost: lost ?? null })}\n${encodeReply(reply)}\n`;
}

/**
 * Before the pool file is written: stage the answers of one cycle (request id
 * to answer text) in one new file of `dir`, so a waiter whose holder dies
 * after the write can still learn what was decided for it (see
 * {@link stagedAnswer}). Returns the file, or `undefined` when it could not be
 * written (then a killed holder's waiters redo their calls without it).
 */
export function stageAnswers(
  fs: LedgerFs,
  dir: string,
  answers: ReadonlyMap<string, string>,
): string | undefined {
  const file = join(dir, `${process.pid}.${Math.random().toString(36).slice(2, 12)}.pre`);
  const text = `${JSON.stringify({ v: 1, answers: Object.fromEntries(answers) })}\n`;
  return writeExclusive(fs, file, text) ? file : undefined;
}

/**
 * The answer staged for request `id` by a holder in the combining directory
 * `dir`, if one of the staged files there holds it (read only: a staged file
 * serves every waiter of its cycle). For a waiter whose holder never answered.
 */
export function stagedAnswer(
  fs: LedgerFs,
  dir: string,
  id: string,
  pool: string,
  maxBytes: number,
): string | undefined {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return undefined;
  }
  for (const name of names) {
    if (!name.endsWith('.pre')) continue;
    let text: string | undefined;
    try {
      text = readLedgerFile(fs, join(dir, name), { pool, maxBytes });
    } catch {
      // Not ours to read: look at the next.
    }
    const answers = text === undefined ? undefined : stagedAnswers(text);
    const answer = answers && Object.hasOwn(answers, id) ? answers[id] : undefined;
    if (typeof answer === 'string') return answer;
  }
  return undefined;
}

// The answers of a staged file's text (one line), by request id; undefined for
// anything else (an answer alone has two lines).
function stagedAnswers(text: string): Record<string, unknown> | undefined {
  if (text.indexOf('\n') !== text.length - 1) return undefined;
  try {
    const staged: unknown = JSON.parse(text);
    return isObject(staged) && staged.v === 1 && isObject(staged.answers)
      ? staged.answers
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The answer for request `id` in the text of its `<id>.ans`: its entry when
 * the file is a linked staged file (`undefined` when that has none for `id`),
 * else the text itself.
 */
export function answerIn(text: string, id: string): string | undefined {
  const own = ownStagedEntry(text, id);
  if (own !== undefined) return own;
  const answers = stagedAnswers(text);
  if (answers === undefined) return text;
  const answer = Object.hasOwn(answers, id) ? answers[id] : undefined;
  return typeof answer === 'string' ? answer : undefined;
}

const STAGED_HEAD = '{"v":1,"answers":{';

// The entry of `id` in a staged file's text, found without parsing the other
// waiters' answers (each waiter reads the one file of its cycle); `undefined`
// when the text is not a whole staged file or has no such entry, which the
// full parse then decides. `"<id>":"` can only be the key: inside a JSON
// string every `"` follows a backslash, and an id holds neither.
function ownStagedEntry(text: string, id: string): string | undefined {
  if (!text.startsWith(STAGED_HEAD) || !text.endsWith('}}\n')) return undefined;
  if (text.indexOf('\n') !== text.length - 1) return undefined;
  const key = `"${id}":"`;
  const at = text.indexOf(key);
  if (at < STAGED_HEAD.length) return undefined;
  const start = at + key.length - 1;
  // The value's closing quote: the first `"` not escaped by a backslash.
  let end = start + 1;
  for (;;) {
    end = text.indexOf('"', end);
    if (end < 0) return undefined;
    let backslashes = 0;
    while (text.charCodeAt(end - 1 - backslashes) === 92) backslashes++;
    if (backslashes % 2 === 0) break;
    end++;
  }
  try {
    const value: unknown = JSON.parse(text.slice(start, end + 1));
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * After the durable write: give every waiter of the cycle its answer, by
 * linking the staged file into its inbox as `<id>.ans` (the link wakes the
 * waiter watching its inbox), or, when there is no staged file or the link
 * fails (a filesystem without hard links), by creating its answer there.
 */
export function publishStaged(
  fs: LedgerFs,
  dir: string,
  staged: string | undefined,
  texts: ReadonlyMap<string, string>,
): void {
  for (const [id, text] of texts) {
    const inbox = inboxOf(dir, id);
    if (inbox === undefined) continue;
    if (staged !== undefined) {
      try {
        fs.linkSync(staged, join(inbox, `${id}.ans`));
        continue;
      } catch {
        // Created below.
      }
    }
    writeExclusive(fs, join(inbox, `${id}.ans`), text);
  }
}

/**
 * Post the answer `text` for request `id` as `<inbox>/<id>.ans` (its creation
 * wakes the waiter watching its inbox); false when it could not be written
 * (the inbox is gone: its waiter gave up).
 */
export function postAnswer(fs: LedgerFs, dir: string, id: string, text: string): boolean {
  const inbox = inboxOf(dir, id);
  return inbox !== undefined && writeExclusive(fs, join(inbox, `${id}.ans`), text);
}

// Create `file` (0600, never through a link, never over an existing file)
// holding `text`. A file made but not written whole (a full filesystem) is
// removed again: an empty answer would never be read (it lacks its newline)
// and nobody would remove it.
function writeExclusive(fs: LedgerFs, file: string, text: string): boolean {
  let fd: number | undefined;
  let whole = false;
  try {
    fd = createExclusive(fs, file, 0o600);
    writeAll(fs, fd, text);
    whole = true;
    return true;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) {
      try {
        fs.closeSync(fd);
      } catch {
        // Closed with the error below.
      }
      if (!whole) {
        try {
          fs.unlinkSync(file);
        } catch {
          // Removed once stale (see `sweepCombineLeftovers`).
        }
      }
    }
  }
}

/** Post "not applied" (`maybe`: a write that carried the calls may have landed) for a claimed request. */
export function postNotApplied(
  fs: LedgerFs,
  dir: string,
  claimed: ClaimedRequest,
  maybe: boolean,
): void {
  postAnswer(fs, dir, claimed.id, notApplied(claimed, maybe));
}

/** The answer "none of your calls was applied by me; do them yourself" (`maybe`: a write that carried them may have landed). */
export function notApplied(claimed: ClaimedRequest, maybe: boolean): string {
  const count = claimed.request?.ops.length ?? 0;
  return encodeAnswer({
    kind: 'direct',
    maybeApplied: Array.from({ length: count }, () => maybe),
    reason: 'the holder did not apply these calls',
  });
}
