/**
 * Spawn pacing (maxConcurrentSpawns, maxSpawnsPerMinute) and the per-scaler
 * failure backoff (exponential, full jitter, bounded, reset on registration).
 */

import type {
  ScaleResult,
  ScalerConfigInput,
  ScalerManagerOptions,
} from 'scaler-primitives/manager';
import { describe, expect, it } from 'vitest';
import type { ScalerEntryInput } from '../../src/manager/config/config.js';
import { handFleet } from './hand-fleet.js';

/** A fleet on the kit, driven by hand. */
function fleet({
  config,
  ...manager
}: Partial<ScalerManagerOptions> & { config: ScalerConfigInput }) {
  return handFleet(config, { manager });
}

function config(extra: Partial<ScalerEntryInput>, second = false): ScalerConfigInput {
  const scalers: ScalerEntryInput[] = [
    { name: 'vm', type: 'c', maxAgents: 50, labelSets: [{ labels: ['linux'] }], ...extra },
  ];
  if (second) {
    scalers.push({ name: 'other', type: 'c', maxAgents: 50, labelSets: [{ labels: ['linux'] }] });
  }
  return { globalMaxAgents: 100, scalers };
}

const kindOf = (r: ScaleResult) => r.kind;

describe('maxConcurrentSpawns', () => {
  it('refuses with spawn-rate once that many agents are spawning, and frees the slot on registration', async () => {
    const { manager } = fleet({ config: config({ maxConcurrentSpawns: 2 }) });
    expect(kindOf(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }))).toBe('spawned');
    expect(kindOf(await manager.requestScale({ jobId: 'j2', labels: ['linux'] }))).toBe('spawned');
    const refused = await manager.requestScale({ jobId: 'j3', labels: ['linux'] });
    expect(refused).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'spawn-rate', window: 'concurrent', used: 2, max: 2 },
    });
    expect(refused.kind === 'at-capacity' && refused.retryAfterMs).toBeGreaterThan(0);
    manager.onAgentRegistered('vm-1', []);
    expect(kindOf(await manager.requestScale({ jobId: 'j3', labels: ['linux'] }))).toBe('spawned');
  });
});

describe('maxSpawnsPerMinute', () => {
  it('allows that many starts in any 60 s and says when the next one may start', async () => {
    const { manager, clock } = fleet({ config: config({ maxSpawnsPerMinute: 3 }) });
    for (const job of ['j1', 'j2', 'j3']) {
      expect(kindOf(await manager.requestScale({ jobId: job, labels: ['linux'] }))).toBe('spawned');
      await clock.advance(10_000);
    }
    const refused = await manager.requestScale({ jobId: 'j4', labels: ['linux'] });
    expect(refused).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'spawn-rate', window: 'minute', used: 3, max: 3, retryAfterMs: 30_000 },
      retryAfterMs: 30_000,
    });
    await clock.advance(29_999);
    expect(kindOf(await manager.requestScale({ jobId: 'j4', labels: ['linux'] }))).toBe(
      'at-capacity',
    );
    await clock.advance(1);
    expect(kindOf(await manager.requestScale({ jobId: 'j4', labels: ['linux'] }))).toBe('spawned');
  });

  it('a paced scaler does not stop the next matching one', async () => {
    const { manager } = fleet({ config: config({ maxSpawnsPerMinute: 1 }, true) });
    expect(await manager.requestScale({ jobId: 'j1', labels: ['linux'] })).toMatchObject({
      scaler: 'vm',
    });
    expect(await manager.requestScale({ jobId: 'j2', labels: ['linux'] })).toMatchObject({
      kind: 'spawned',
      scaler: 'other',
    });
  });
});

describe('spawn-failure backoff', () => {
  it('opens after the threshold, answers backing-off with the last error, and closes on registration', async () => {
    let random = 0.5;
    const { manager, backend, clock, events } = fleet({
      config: config({ spawnBackoff: { failureThreshold: 2, initialMs: 1000, maxMs: 8000 } }),
      random: () => random,
    });
    backend
      .failNext(1, new Error('boom spawning vm-1'))
      .failNext(1, new Error('boom spawning vm-2'));
    expect(kindOf(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }))).toBe(
      'spawn-failed',
    );
    expect(kindOf(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }))).toBe(
      'spawn-failed',
    );
    const refused = await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    expect(refused).toMatchObject({ kind: 'backing-off', scaler: 'vm', retryAfterMs: 500 });
    expect(refused.kind === 'backing-off' && String(refused.lastError)).toMatch(
      /boom spawning vm-2/,
    );
    expect(events.filter((e) => e.kind === 'backoff-opened')).toHaveLength(1);
    expect(manager.getStatus().scalers[0]!.backoff).toMatchObject({ failures: 2, open: true });
    await clock.advance(500);
    // Half-open: one probe goes through; the next waits for it.
    backend.failNext(1);
    expect(kindOf(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }))).toBe(
      'spawn-failed',
    );
    // Third failure: the bound doubles (2000 ms), jitter 0.5 -> 1000 ms.
    expect(await manager.requestScale({ jobId: 'j1', labels: ['linux'] })).toMatchObject({
      kind: 'backing-off',
      retryAfterMs: 1000,
    });
    random = 0.999;
    await clock.advance(1000);
    expect(kindOf(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }))).toBe('spawned');
    expect(await manager.requestScale({ jobId: 'j2', labels: ['linux'] })).toMatchObject({
      kind: 'backing-off',
    });
    manager.onAgentRegistered('vm-4', []);
    expect(events.filter((e) => e.kind === 'backoff-closed')).toHaveLength(1);
    expect(manager.getStatus().scalers[0]!.backoff).toBeUndefined();
    expect(kindOf(await manager.requestScale({ jobId: 'j2', labels: ['linux'] }))).toBe('spawned');
  });

  it('is bounded by maxMs whatever the number of failures', async () => {
    const { manager, backend, clock } = fleet({
      config: config({ spawnBackoff: { failureThreshold: 1, initialMs: 1000, maxMs: 4000 } }),
      random: () => 0.999,
    });
    let last = 0;
    for (let i = 0; i < 12; i++) {
      backend.failNext(1);
      expect(kindOf(await manager.requestScale({ jobId: `j${i}`, labels: ['linux'] }))).toBe(
        'spawn-failed',
      );
      const refused = await manager.requestScale({ jobId: `j${i}`, labels: ['linux'] });
      expect(refused.kind).toBe('backing-off');
      last = refused.kind === 'backing-off' ? refused.retryAfterMs : 0;
      expect(last).toBeLessThan(4000);
      await clock.advance(last);
    }
    expect(last).toBe(3996);
  });

  it('agents that never register count as failures', async () => {
    const { manager, clock } = fleet({
      config: config({ spawnBackoff: { failureThreshold: 1, initialMs: 1000, maxMs: 1000 } }),
      registrationTimeoutMs: 1000,
    });
    expect(kindOf(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }))).toBe('spawned');
    await clock.advance(1000);
    await manager.maintain();
    expect(await manager.requestScale({ jobId: 'j1', labels: ['linux'] })).toMatchObject({
      kind: 'backing-off',
      lastError: expect.objectContaining({ message: expect.stringMatching(/register/) }),
    });
  });

  it('one failing scaler never starves the others', async () => {
    const { manager, backend } = fleet({
      config: config(
        { spawnBackoff: { failureThreshold: 1, initialMs: 60_000, maxMs: 60_000 } },
        true,
      ),
    });
    backend.failNext(1);
    expect(kindOf(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }))).toBe(
      'spawn-failed',
    );
    for (let i = 2; i < 6; i++) {
      expect(await manager.requestScale({ jobId: `j${i}`, labels: ['linux'] })).toMatchObject({
        kind: 'spawned',
        scaler: 'other',
      });
    }
  });
});
