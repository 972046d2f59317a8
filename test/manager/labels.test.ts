import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  automaticLabels,
  labelSetMatches,
  passesMandatoryGate,
} from '../../src/manager/spawning/labels.js';

describe('label matching', () => {
  it.each([
    // job, agent, mandatory, exclude, expected
    [['linux'], ['linux', 'x64'], [], [], true],
    [[], ['linux'], [], [], true],
    [['linux', 'arm'], ['linux', 'x64'], [], [], false],
    [['linux'], ['linux', 'gpu'], ['gpu'], [], false],
    [['linux', 'gpu'], ['linux', 'gpu'], ['gpu'], [], true],
    [['linux'], ['linux', 'x64'], [], ['x64'], false],
    [['linux'], ['linux', 'x64'], [], ['arm'], true],
  ] as const)(
    'job %j on %j (mandatory %j, exclude %j) -> %s',
    (job, agent, mandatory, exclude, expected) => {
      expect(
        labelSetMatches(job, agent, { mandatoryLabels: mandatory, excludeLabels: exclude }),
      ).toBe(expected);
    },
  );

  it('the mandatory gate needs every mandatory label', () => {
    expect(passesMandatoryGate(['a', 'b'], ['a', 'b'])).toBe(true);
    expect(passesMandatoryGate(['a'], ['a', 'b'])).toBe(false);
    expect(passesMandatoryGate([], [])).toBe(true);
  });

  it('automatic labels: the scaler label first, platform labels deduplicated', () => {
    expect(
      automaticLabels('scaler-primitives:', 'small', [
        'scaler-primitives:os:linux',
        'scaler-primitives:os:linux',
      ]),
    ).toEqual(['scaler-primitives:scaler:small', 'scaler-primitives:os:linux']);
  });

  it('property: a match implies subset, gate and no exclusion; adding a job label never helps', () => {
    const label = fc.constantFrom('a', 'b', 'c', 'd', 'e');
    fc.assert(
      fc.property(
        fc.uniqueArray(label),
        fc.uniqueArray(label),
        fc.uniqueArray(label),
        fc.uniqueArray(label),
        label,
        (job, agent, mandatory, exclude, extra) => {
          const ok = labelSetMatches(job, agent, {
            mandatoryLabels: mandatory,
            excludeLabels: exclude,
          });
          const expected =
            job.every((l) => agent.includes(l)) &&
            mandatory.every((l) => job.includes(l)) &&
            !exclude.some((l) => agent.includes(l));
          expect(ok).toBe(expected);
          if (!agent.includes(extra)) {
            expect(
              labelSetMatches([...job, extra], agent, {
                mandatoryLabels: mandatory,
                excludeLabels: exclude,
              }),
            ).toBe(false);
          }
        },
      ),
    );
  });
});
