import fc from 'fast-check';
import { renderIsolationPlan, validateInterfaceName } from 'scaler-primitives/nftables';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { parseCidr } from '../../src/nftables/validate.js';

const LINE =
  /^(create chain|add rule|add element) inet scaler_primitives [A-Za-z0-9_.-]+( [A-Za-z0-9_.,:/{}@"=+ -]+)?$/;

describe('properties', () => {
  it('any string is either refused or renders only well-formed, single-quoted-token lines', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), fc.string({ maxLength: 20 }), (iifname, id) => {
        let text: string;
        try {
          text = renderIsolationPlan(id, { iifname });
        } catch (error) {
          expect(isInvalidInputError(error)).toBe(true);
          return;
        }
        for (const line of text.trimEnd().split('\n')) {
          expect(line).toMatch(LINE);
          // Quotes come in pairs and only around the interface name or the comment.
          expect((line.match(/"/g) ?? []).length % 2).toBe(0);
        }
        expect(text).toContain(`"${iifname}"`);
      }),
    );
  });

  it('interface names that pass are Linux-valid and nft-safe', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), (name) => {
        try {
          validateInterfaceName(name);
        } catch (error) {
          expect(isInvalidInputError(error)).toBe(true);
          return;
        }
        expect(Buffer.byteLength(name)).toBeLessThanOrEqual(15);
        expect(name).not.toMatch(/[\s/:"\\*]/);
        expect(['.', '..', '']).not.toContain(name);
      }),
    );
  });

  it('IPv4 networks: normalized text re-parses to itself; host bits are always refused', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        fc.integer({ min: 0, max: 32 }),
        (n, p) => {
          const address = [24, 16, 8, 0].map((s) => (n >>> s) & 255).join('.');
          const hostBits = p === 32 ? 0 : n % 2 ** (32 - p);
          const input = `${address}/${p}`;
          if (hostBits !== 0) {
            expect(() => parseCidr(input)).toThrow(/host bits are set/);
            return;
          }
          const cidr = parseCidr(input);
          expect(parseCidr(cidr.text)).toEqual(cidr);
          expect(cidr.prefix).toBe(p);
        },
      ),
    );
  });

  it('IPv6 addresses: any spelling normalizes to one canonical form', () => {
    fc.assert(
      fc.property(fc.ipV6(), (address) => {
        let cidr: ReturnType<typeof parseCidr>;
        try {
          cidr = parseCidr(address);
        } catch (error) {
          // Only IPv4-mapped addresses are refused.
          expect(isInvalidInputError(error)).toBe(true);
          expect(String((error as Error).message)).toMatch(/IPv4 form/);
          return;
        }
        expect(cidr.family).toBe(6);
        expect(parseCidr(cidr.text.toUpperCase()).text).toBe(cidr.text);
        expect(cidr.text).toBe(cidr.text.toLowerCase());
      }),
    );
  });
});
