/**
 * Cases ported, as data, from the Kubernetes apimachinery quantity tests:
 * https://github.com/kubernetes/apimachinery/blob/357557a670d84c30ef3b5355f02c11d8aba5a941/pkg/api/resource/quantity_test.go
 * (commit 357557a670d84c30ef3b5355f02c11d8aba5a941; Apache-2.0). Only the facts are
 * kept: each input and the exact value Kubernetes parses it to, or the string
 * Kubernetes prints for a value.
 */

/** `TestQuantityParse`: input, and the exact parsed value `coefficient × 10^exponent`. */
export const PARSE_CASES: ReadonlyArray<
  readonly [input: string, coefficient: bigint, exponent: number]
> = [
  ['0', 0n, 0],
  ['0n', 0n, 0],
  ['0u', 0n, 0],
  ['0m', 0n, 0],
  ['0Ki', 0n, 0],
  ['0k', 0n, 0],
  ['0Mi', 0n, 0],
  ['0M', 0n, 0],
  ['0Gi', 0n, 0],
  ['0G', 0n, 0],
  ['0Ti', 0n, 0],
  ['0T', 0n, 0],
  ['1', 1n, 0],
  ['1Ki', 1024n, 0],
  ['8Ki', 8n * 1024n, 0],
  ['7Mi', 7n * 1024n ** 2n, 0],
  ['6Gi', 6n * 1024n ** 3n, 0],
  ['5Ti', 5n * 1024n ** 4n, 0],
  ['4Pi', 4n * 1024n ** 5n, 0],
  ['3Ei', 3n * 1024n ** 6n, 0],
  ['10Ti', 10n * 1024n ** 4n, 0],
  ['100Ti', 100n * 1024n ** 4n, 0],
  ['5n', 5n, -9],
  ['4u', 4n, -6],
  ['3m', 3n, -3],
  ['9', 9n, 0],
  ['8k', 8n, 3],
  ['50k', 5n, 4],
  ['7M', 7n, 6],
  ['6G', 6n, 9],
  ['5T', 5n, 12],
  ['40T', 4n, 13],
  ['300T', 3n, 14],
  ['2P', 2n, 15],
  ['1E', 1n, 18],
  ['1E-3', 1n, -3],
  ['1e3', 1n, 3],
  ['1E6', 1n, 6],
  ['1e9', 1n, 9],
  ['1E12', 1n, 12],
  ['1e15', 1n, 15],
  ['1E18', 1n, 18],
  ['1e14', 1n, 14],
  ['1e13', 1n, 13],
  ['100.035k', 100035n, 0],
  ['0.001', 1n, -3],
  ['0.0005k', 5n, -1],
  ['0.005', 5n, -3],
  ['0.05', 5n, -2],
  ['0.5', 5n, -1],
  ['0.00050k', 5n, -1],
  ['0.00500', 5n, -3],
  ['0.05000', 5n, -2],
  ['0.50000', 5n, -1],
  ['0.5e0', 5n, -1],
  ['0.5e-1', 5n, -2],
  ['0.5e-2', 5n, -3],
  ['10.035M', 10035n, 3],
  ['1.2e3', 12n, 2],
  ['1.3E+6', 13n, 5],
  ['1.40e9', 14n, 8],
  ['1.53E12', 153n, 10],
  ['1.6e15', 16n, 14],
  ['1.7E18', 17n, 17],
  ['9.01', 901n, -2],
  ['8.1k', 81n, 2],
  ['7.123456M', 7123456n, 0],
  ['6.987654321G', 6987654321n, 0],
  ['5.444T', 5444n, 9],
  ['40.1T', 401n, 11],
  ['300.2T', 3002n, 11],
  ['2.5P', 25n, 14],
  ['1.01E', 101n, 16],
  // Kubernetes stores these rounded up to a whole nanounit; the value below is
  // that stored value, whose millis and bytes round up the same as the input's.
  ['3.001n', 4n, -9],
  ['1.1E-9', 2n, -9],
  ['0.0000000001', 1n, -9],
  ['0.0000000005', 1n, -9],
  ['0.00000000050', 1n, -9],
  ['0.5e-9', 1n, -9],
  ['0.9n', 1n, -9],
  ['0.00000012345', 124n, -9],
  ['0.00000012354', 124n, -9],
  // Kubernetes saturates these at 2^63 - 1; far beyond what the library counts.
  ['9Ei', 9n * 1024n ** 6n, 0],
  ['9223372036854775807Ki', 9223372036854775807n * 1024n, 0],
  ['12E', 12n, 18],
  ['100.035Ki', 10243584n, -2],
  ['0.5Mi', 524288n, 0],
  ['0.05Gi', 536870912n, -1],
  ['0.025Ti', 274877906944n, -1],
  ['0.000000000001Ki', 2n, -9],
  ['.001', 1n, -3],
  ['.0001k', 100n, -3],
  ['1.', 1n, 0],
  ['1.G', 1n, 9],
];

/** `TestParseQuantityString`: odd corners that parse (to zero here). */
export const ZERO_CASES: readonly string[] = ['.', '-.', '+', '-0', '000', '+0.0'];

/** `TestQuantityParse` invalid table: strings Kubernetes refuses. */
export const INVALID_CASES: readonly string[] = [
  '',
  '1.1.M',
  '1+1.0M',
  '0.1mi',
  '0.1am',
  'aoeu',
  '.5i',
  '1i',
  '-3.01i',
  '-3.01e-',
  ' 1',
  '1 ',
  'Non-Numeric',
];

/**
 * `TestQuantityString`, `TestNewSet`, `TestMilliNewSet`, `TestQuantityParseEmit`:
 * millicores (a `DecimalSI` quantity) and the string Kubernetes prints.
 */
export const CPU_STRING_CASES: ReadonlyArray<readonly [millicores: number, text: string]> = [
  [1e12, '1G'],
  [1e15, '1T'],
  [1234567e9, '1234567M'],
  [1, '1m'],
  [80, '80m'],
  [1080, '1080m'],
  [300e9, '300M'],
  [3e6, '3k'],
  [0, '0'],
  [1000, '1'],
  [1234000, '1234'],
  [1e6, '1k'],
  [1234000e3, '1234k'],
  [1024, '1024m'],
];

/** The same tests: bytes (a `BinarySI` quantity) and the string Kubernetes prints. */
export const MEMORY_STRING_CASES: ReadonlyArray<readonly [bytes: number, text: string]> = [
  [1024 ** 3, '1Gi'],
  [300 * 1024 ** 2, '300Mi'],
  [6 * 1024, '6Ki'],
  [1001 * 1024 ** 3, '1001Gi'],
  [1024 ** 4, '1Ti'],
  [5, '5'],
  [1025, '1025'],
  [0, '0'],
  [1024, '1Ki'],
  [1024 ** 2, '1Mi'],
  [1000, '1k'],
];

/**
 * `TestQuantityString` (each canonical string and its alternate spelling) and
 * `TestQuantityParseEmit` (input and what Kubernetes prints for it): two strings
 * Kubernetes reads as the same value.
 */
export const SAME_VALUE_CASES: ReadonlyArray<readonly [input: string, same: string]> = [
  ['1024Mi', '1Gi'],
  ['307200Ki', '300Mi'],
  ['1025024Mi', '1001Gi'],
  ['1024Gi', '1Ti'],
  ['5000m', '5'],
  ['0.5', '500m'],
  ['1000M', '1G'],
  ['0.001T', '1G'],
  ['1000u', '1m'],
  ['1.08', '1080m'],
  ['1080000000n', '1080m'],
  ['1000E', '1e21'],
  ['5000E', '5e21'],
  ['1000000E', '1e24'],
  ['.001e12', '1e9'],
  ['0.001e0', '1e-3'],
  ['1000e-12', '1e-9'],
  ['00', '0'],
  ['80e-3', '80m'],
  ['300e6', '300M'],
  ['1e12', '1T'],
  ['3e3', '3k'],
  ['1234567M', '1234567e6'],
  ['.001Ki', '1024m'],
  ['.000001Ki', '1024u'],
  ['.000000001Ki', '1024n'],
  ['.000000000001Ki', '2n'],
];
