/**
 * A TypeScript source without its comments, for tests that check what code
 * imports: a TSDoc example may show `import ... from 'scaler-primitives/x'` or
 * `node:fs` as a user writes it, which is no import of the module itself.
 */
export function codeOf(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}
