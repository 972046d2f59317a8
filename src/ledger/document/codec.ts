/**
 * The pool document as text: its version, the schema every backend validates
 * against, parse, validate and serialize. No I/O, no clock.
 */

import { z } from 'zod';
import { LedgerCapMismatchError, LedgerCorruptError } from '../../errors/index.js';
import {
  capFeaturesOf,
  KNOWN_CAP_FEATURES,
  normalizeCap,
  STORED,
  storedCapShape,
} from '../../resources/cap-fields.js';
import type { ResourceCap } from '../../resources/types.js';
import type { LedgerDocument } from '../types.js';

/**
 * The document version this library reads and writes.
 */
export const LEDGER_VERSION = 1;

// The row's counts, names and device ids are stored as a cap stores them.
const { finiteNonNegative, extendedCounts, deviceIds } = STORED;

const capSchema = z.looseObject(storedCapShape());

const rowSchema = z.looseObject({
  instanceId: z.string(),
  pid: z.number().int().nonnegative(),
  bootId: z.string(),
  agentId: z.string(),
  cpus: finiteNonNegative,
  memBytes: finiteNonNegative,
  reservedAt: z.number().finite(),
  pidStartTime: z.number().int().nonnegative().optional(),
  leaseId: z.string().optional(),
  extended: extendedCounts.optional(),
  devices: deviceIds.optional(),
});

const documentSchema = z.looseObject({
  version: z.literal(LEDGER_VERSION),
  cap: capSchema,
  capFeatures: z.array(z.string()).optional(),
  reservations: z.array(rowSchema),
});

/**
 * Where a document came from, for error messages: its pool and its file path or KV key.
 */
export interface DocumentSource {
  /** The pool name. */
  pool: string;
  /** The file path or KV key the document was read from. */
  location: string;
}

/**
 * Parse and validate the text of a pool document. Unknown fields, in the
 * document and in rows, are kept.
 *
 * @throws LedgerCorruptError when the text is not JSON, the version is not 1,
 *   or a field has the wrong type; the message names the location and the field.
 */
export function parseDocument(text: string, source: DocumentSource): LedgerDocument {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    // V8's message quotes the text; only the position is kept (never the contents).
    const at = /position (\d+)/.exec(messageOf(error))?.[1];
    const detail =
      text.trim() === ''
        ? 'it is empty'
        : `it is not valid JSON (${at === undefined ? 'a syntax error' : `a syntax error at byte offset ${at}`}, ${text.length} characters)`;
    throw corrupt(source, detail);
  }
  return validateDocument(value, source);
}

/**
 * Validate an already-parsed pool document (for stores that hand over values).
 * Returns the value itself: every field is kept, a field named `__proto__`
 * included (an own property of the value, as `JSON.parse` makes it).
 *
 * @throws LedgerCorruptError as {@link parseDocument}.
 */
export function validateDocument(value: unknown, source: DocumentSource): LedgerDocument {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw corrupt(source, 'it is not a JSON object');
  }
  const version = (value as { version?: unknown }).version;
  if (version !== LEDGER_VERSION) {
    throw corrupt(
      source,
      `its version is ${describeVersion(version)}, and this library reads version ${LEDGER_VERSION} only`,
    );
  }
  const result = documentSchema.safeParse(value);
  if (!result.success) {
    const first = result.error.issues[0]!;
    const where = first.path.length === 0 ? 'the document' : `\`${formatPath(first.path)}\``;
    const more =
      result.error.issues.length > 1 ? ` (and ${result.error.issues.length - 1} more)` : '';
    throw corrupt(source, `${where}: ${first.message}${more}`, result.error);
  }
  const features = (value as { capFeatures?: string[] }).capFeatures;
  const unknown = features?.find((feature) => !KNOWN_CAP_FEATURES.includes(feature));
  if (unknown !== undefined) throw unknownFeature(source, value as LedgerDocument, unknown);
  // The schema only checks (no defaults, no transforms), so the value itself is
  // the document. zod's output would drop a field named `__proto__` (JSON allows
  // one; JSON.parse makes it an own property, never the prototype); the value
  // keeps every field a writer put there, and the rewrite keeps them too.
  return value as LedgerDocument;
}

/**
 * Render a document as the text written to the store (two-space JSON, trailing newline).
 */
export function serializeDocument(doc: LedgerDocument): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/**
 * A fresh, empty document for a pool with this cap. It lists the cap features
 * the cap uses beyond the baseline in `capFeatures`, and has no such field when
 * it uses none (so a baseline document is byte for byte what kici writes).
 */
export function emptyDocument(cap: ResourceCap): LedgerDocument {
  const normalized = normalizeCap(cap);
  const capFeatures = capFeaturesOf(normalized);
  return capFeatures.length === 0
    ? { version: LEDGER_VERSION, cap: normalized, reservations: [] }
    : { version: LEDGER_VERSION, cap: normalized, capFeatures, reservations: [] };
}

// A pool whose cap uses a feature this copy does not know: it cannot enforce
// that cap, so it refuses the pool rather than grant past a limit it cannot read.
function unknownFeature(
  source: DocumentSource,
  doc: LedgerDocument,
  feature: string,
): LedgerCapMismatchError {
  const known = KNOWN_CAP_FEATURES.length === 0 ? 'none' : KNOWN_CAP_FEATURES.join(', ');
  return new LedgerCapMismatchError(
    source.pool,
    doc.cap,
    undefined,
    `Pool ${JSON.stringify(source.pool)} at ${source.location} has a cap that uses the feature ${JSON.stringify(feature.slice(0, 64))}, which this copy of scaler-primitives does not know (it knows the baseline cap fields and these features: ${known}). It cannot enforce that cap, so it refuses the pool; nothing was written. Upgrade every writer of the pool to a version that knows the feature.`,
  );
}

function corrupt(source: DocumentSource, detail: string, cause?: unknown): LedgerCorruptError {
  return new LedgerCorruptError(
    source.pool,
    source.location,
    `Ledger for pool ${JSON.stringify(source.pool)} at ${source.location} is corrupt: ${detail}. Nothing was written; inspect the file and clear it deliberately (see docs/ledger.md, "Clearing a corrupt pool").`,
    cause === undefined ? undefined : { cause },
  );
}

// A version for messages: a number as is, anything else by its type (never file text).
function describeVersion(version: unknown): string {
  if (version === undefined) return 'missing';
  if (typeof version === 'number') return String(version);
  return `not a number (${version === null ? 'null' : Array.isArray(version) ? 'an array' : `a ${typeof version}`})`;
}

function formatPath(path: ReadonlyArray<PropertyKey>): string {
  return path
    .map((key, i) =>
      typeof key === 'number' ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`,
    )
    .join('');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
