/**
 * What a bad quantity is told: the accepted forms per convention, and a hint
 * for the common mistakes (`"8GB"`, `"500M"` cores, surrounding whitespace).
 */
import { ResourceParseError } from '../errors/index.js';
import type { QuantityConvention } from './convention.js';
import { MAX_QUANTITY_LENGTH } from './decimal.js';

const CPU_FORMS: Record<QuantityConvention, string> = {
  binary: 'a number of cores >= 0 (2, 1.5, "2", "1.5", ".5", "+2") or whole millicores ("500m")',
  kubernetes:
    'a Kubernetes quantity >= 0: cores ("2", "1.5", "1.", ".5", "+2") with an optional suffix n u m k M G T P E or Ki Mi Gi Ti Pi Ei, or an exponent ("1e3", "1.3E+6"): "500m"',
};
const MEMORY_FORMS: Record<QuantityConvention, string> = {
  binary:
    'bytes (1073741824, "1073741824") or a number with a suffix: Ki Mi Gi Ti Pi Ei, or k m g t p e / K M G T P E (all 1024-based), with an optional leading "+": "8Gi", "512m", "1.5G"',
  kubernetes:
    'a Kubernetes quantity >= 0: bytes (1073741824, "1e9", "1.") with an optional suffix Ki Mi Gi Ti Pi Ei (1024-based) or n u m k M G T P E (1000-based), or an exponent: "8Gi", "500M", "1e9"',
};

/** A value as an error message quotes it: a long string is cut, never echoed whole. */
export function describe(value: unknown): string {
  if (typeof value !== 'string') return String(value);
  if (value.length <= MAX_QUANTITY_LENGTH) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, 16))}... (${value.length} characters)`;
}

/** The `ResourceParseError` of a bad CPU quantity: the value, `detail`, the accepted forms. */
export function cpuError(value: unknown, convention: QuantityConvention, detail: string) {
  return new ResourceParseError(
    'cpu',
    value,
    `Invalid CPU quantity ${describe(value)}${detail}. Expected ${CPU_FORMS[convention]}.`,
  );
}

/** A hint for a common CPU mistake (`"500M"`, `" 2"`, `"-1"`), or `''`. */
export function cpuHint(text: string): string {
  if (text.trim() !== text) return ' (remove the surrounding whitespace)';
  if (text.startsWith('-')) return ': must be >= 0 (a request cannot be negative)';
  const value = unsigned(text);
  if (/^\d+M$/.test(value)) return ` (millicores are a lower-case m: "${value.slice(0, -1)}m")`;
  if (/^\d+(\.\d+)?m$/.test(value)) return ' (millicores must be a whole number)';
  if (/^(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[nukKMGTPE]i?)$/.test(value)) {
    return ' (this form needs { convention: "kubernetes" })';
  }
  return '';
}

/** A hint for a common memory mistake (`"8GB"`, `"8gi"`, whitespace, a sign), or `''`. */
export function memoryHint(text: string, convention: QuantityConvention): string {
  if (text.trim() !== text) return ' (remove the surrounding whitespace)';
  if (text.startsWith('-')) return ': must be >= 0 (a request cannot be negative)';
  const value = unsigned(text);
  const si = /^(\d+(?:\.\d+)?|\.\d+)([kKmMgGtTpPeE])[bB]$/.exec(value);
  if (si) return ` (did you mean "${si[1]}${si[2]!.toUpperCase()}i"?)`;
  if (/^(\d+(?:\.\d+)?|\.\d+)[kmgtpe]i$/.test(value)) {
    return ` (binary suffixes are written with an upper-case letter: "${value.slice(0, -2)}${value.at(-2)!.toUpperCase()}i")`;
  }
  if (convention === 'kubernetes' && /^(\d+(?:\.\d+)?|\.\d+)[gtpK]$/.test(value)) {
    return ` (Kubernetes suffixes are k M G T P E or Ki Mi Gi Ti Pi Ei)`;
  }
  return '';
}

// The hints read the number after a leading `+` (`"+8GB"` gets the `"8Gi"` hint).
function unsigned(text: string): string {
  return text.startsWith('+') ? text.slice(1) : text;
}

/** The `ResourceParseError` of a bad memory quantity: the value, `detail`, the accepted forms. */
export function memoryError(value: unknown, convention: QuantityConvention, detail: string) {
  return new ResourceParseError(
    'memory',
    value,
    `Invalid memory quantity ${describe(value)}${detail}. Expected ${MEMORY_FORMS[convention]}.`,
  );
}
