import {
  addIsolationRules,
  type IsolationPolicy,
  renderIsolationPlan,
  validateAgentId,
  validateInterfaceName,
} from 'scaler-primitives/nftables';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { parseAddress, parseCidr } from '../../src/nftables/validate.js';

function refusal(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a refusal');
}

describe('interface names', () => {
  it.each([
    ['eth0" ; flush ruleset ; "'],
    [''],
    ['.'],
    ['..'],
    ['a/b'],
    ['a:b'],
    ['a b'],
    ['tab\tname'],
    ['new\nline'],
    ['veth*'],
    ['back\\slash'],
    ['quo"te'],
    ['sixteen-chars-xx'],
    ['ünïcode'],
    [42],
    [undefined],
  ])('refuses %j', (value) => {
    const error = refusal(() => validateInterfaceName(value));
    expect(isInvalidInputError(error)).toBe(true);
    expect(error.message).toContain(JSON.stringify(value) ?? String(value));
    expect(error.message).toMatch(/expected a Linux interface name of 1-15 characters/);
  });

  it.each(['eth0', 'veth-ab', 'tap_1.2', 'fifteen-chars-x', 'br@vlan+1'])('accepts %s', (name) => {
    expect(validateInterfaceName(name)).toBe(name);
  });
});

describe('agent ids', () => {
  it.each(['', '-lead', '.hidden', 'a b', 'x"y', 'a'.repeat(65), 'semi;colon', 'a/b'])(
    'refuses %j',
    (value) => {
      const error = refusal(() => validateAgentId(value));
      expect(isInvalidInputError(error)).toBe(true);
      expect(error.message).toContain(JSON.stringify(value));
    },
  );

  it('accepts the documented charset', () => {
    expect(validateAgentId('ci-runner_7.a')).toBe('ci-runner_7.a');
  });
});

describe('addresses and networks', () => {
  it.each([
    ['10.0.0.0/33', /expected an IPv4 address or network/],
    ['10.0.0.0/-1', /expected/],
    ['10.0.0.0/08', /expected/],
    ['10.0.0.0/', /expected/],
    [
      '1.2.3.4/8',
      /host bits are set after the \/8 prefix; write the network address \(1\.0\.0\.0\/8\)/,
    ],
    ['fd00::1/64', /host bits .* \(fd00::\/64\)/],
    ['::ffff:10.0.0.1', /IPv4 form/],
    ['::ffff:10.0.0.0/104', /IPv4 form/],
    ['fe80::1%eth0', /without zone index/],
    ['010.0.0.1', /expected/],
    ['10.0.0.1 ', /expected/],
    ['256.0.0.1', /expected/],
    ['example.com', /expected/],
    ['fd00::/129', /expected/],
  ])('refuses %j', (value, message) => {
    const error = refusal(() => parseCidr(value));
    expect(isInvalidInputError(error)).toBe(true);
    expect(error.message).toContain(JSON.stringify(value));
    expect(error.message).toMatch(message);
  });

  it('refuses a network where a single address is expected', () => {
    expect(isInvalidInputError(refusal(() => parseAddress('10.0.0.0/8')))).toBe(true);
  });

  it.each([
    ['10.0.0.0/8', '10.0.0.0/8'],
    ['10.0.0.1', '10.0.0.1'],
    ['10.0.0.1/32', '10.0.0.1'],
    ['FD00:EC2:0:0::254', 'fd00:ec2::254'],
    ['fc00::/7', 'fc00::/7'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['0.0.0.0/0', '0.0.0.0/0'],
    ['::/0', '::/0'],
  ])('normalizes %s to %s', (value, text) => {
    expect(parseCidr(value).text).toBe(text);
  });
});

describe('policies are refused before any nft runs', () => {
  const base = { iifname: 'veth-a' } as const;
  it.each<[string, unknown, RegExp]>([
    ['no identity', {}, /exactly one of `iifname`, `saddr` or `skuid`, got none/],
    ['two identities', { iifname: 'a', saddr: '10.0.0.2' }, /got `iifname` and `saddr`/],
    ['injection in iifname', { iifname: 'eth0" ; flush ruleset ; "' }, /interface name/],
    ['saddr network', { saddr: '10.0.0.0/24' }, /agent source address/],
    ['mapped saddr', { saddr: '::ffff:10.0.0.1' }, /IPv4 form/],
    ['uid negative', { skuid: -1 }, /uid -1: expected an integer from 0/],
    ['uid fraction', { skuid: 1.5 }, /uid 1.5/],
    ['port 0', { ...base, hostAccess: [0] }, /port 0: expected an integer from 1 to 65535/],
    ['port 65536', { ...base, hostAccess: [{ port: 65536 }] }, /port 65536/],
    ['protocol', { ...base, hostAccess: [{ port: 53, protocol: 'sctp' }] }, /`tcp` or `udp`/],
    ['gateway network', { ...base, gateway: '10.0.0.0/8' }, /gateway address/],
    ['allowlist host bits', { ...base, allowlist: ['1.2.3.4/8'] }, /allowlist entry "1.2.3.4\/8"/],
    ['blocked bad', { ...base, blocked: ['10.0.0.0/33'] }, /blocked range/],
    ['metadata bad', { ...base, metadata: ['metadata.google'] }, /metadata address/],
    ['hostAccess with skuid', { skuid: 1000, hostAccess: [80] }, /skuid/],
  ])('%s', async (_name, policy, message) => {
    const calls: string[][] = [];
    const runner = async (file: string, args: readonly string[]) => {
      calls.push([file, ...args]);
      return { stdout: '', stderr: '', exitCode: 0 };
    };
    const error = refusal(() => renderIsolationPlan('a', policy as IsolationPolicy));
    expect(isInvalidInputError(error)).toBe(true);
    expect(error.message).toMatch(message);
    await expect(addIsolationRules('a', policy as IsolationPolicy, { runner })).rejects.toSatisfy(
      isInvalidInputError,
    );
    expect(calls).toEqual([]);
  });

  it('refuses a bad table name, layout or netns', async () => {
    const runner = async () => ({ stdout: '', stderr: '', exitCode: 0 });
    for (const opts of [{ table: 'kici; flush ruleset' }, { netns: '-x' }, { layout: 'chains' }]) {
      await expect(
        addIsolationRules('a', { iifname: 'veth-a' }, { runner, ...(opts as object) }),
      ).rejects.toSatisfy(isInvalidInputError);
    }
  });
});
