/**
 * `ScalerEvent` is a closed union: every kind the manager emits is declared in
 * `ScalerEventData` and listed in `SCALER_EVENT_KINDS`, and docs/manager.md
 * lists the same kinds. Three checks, each able to fail:
 *
 * - the compiler refuses an emit of an undeclared kind, or with the wrong data
 *   (a program compiled here with the project's own settings);
 * - a manager driven through its main paths emits only listed kinds;
 * - the events table of docs/manager.md names exactly the listed kinds.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  MemoryStateStore,
  SCALER_EVENT_KINDS,
  type ScalerEvent,
  ScalerManager,
} from 'scaler-primitives/manager';
import { FakeBackend, MemoryPoolLedger, TestClock } from 'scaler-primitives/testing';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');

function compile(source: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'scaler-events-'));
  try {
    const file = join(dir, 'emit.mts');
    writeFileSync(file, source);
    const config = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
    const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
    const program = ts.createProgram([file], { ...parsed.options, noEmit: true });
    return ts
      .getPreEmitDiagnostics(program, program.getSourceFile(file))
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('ScalerEvent: the compiler refuses an undeclared kind', () => {
  const header = `
import type { AgentRecord } from '${root}/src/manager/agents/agents.js';
import type { FleetCore } from '${root}/src/manager/core.js';
export function emit(core: FleetCore, record: AgentRecord): void {
`;

  it('accepts declared kinds with their data', () => {
    const errors = compile(
      `${header}
  core.emitFor(record, 'busy', 'm', { runId: 'r', jobId: 'j' });
  core.emitFor(record, 'idle', 'm');
  core.emitGeneral('s', 'backoff-closed', 'm', {});
}`,
    );
    expect(errors).toEqual([]);
  }, 60_000);

  it.each([
    ["core.emitFor(record, 'made-up', 'm', {});", '"made-up"'],
    ["core.emitGeneral('s', 'warm-pool-exploded', 'm', {});", 'warm-pool-exploded'],
    ["core.emitFor(record, 'busy', 'm', { runId: 'r', jobId: 1 });", "'number' is not assignable"],
    ["core.emitFor(record, 'busy', 'm');", 'Expected 4 arguments'],
  ])(
    'refuses %s',
    (line, named) => {
      const errors = compile(`${header}  ${line}\n}`);
      expect(errors.length).toBeGreaterThan(0);
      expect(errors.join('\n')).toContain(named);
    },
    60_000,
  );
});

describe('ScalerEvent: a manager driven through its paths emits only listed kinds', () => {
  it('every manager event seen has a kind of SCALER_EVENT_KINDS', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const backend = new FakeBackend({ clock, name: 'vm' });
    const ledger = new MemoryPoolLedger({ instanceId: 'events', clock });
    const events: ScalerEvent[] = [];
    let n = 0;
    const manager = new ScalerManager({
      config: {
        globalMaxAgents: 4,
        machinePools: { host: { maxCpu: 8 } },
        scalers: [
          {
            name: 'vm',
            type: 'fake',
            maxAgents: 4,
            machinePool: 'host',
            labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
            spawnBackoff: { failureThreshold: 1, initialMs: 1000, maxMs: 1000 },
          },
        ],
      },
      backends: [{ name: 'vm', backend }],
      ledgers: { host: ledger },
      clock,
      stateStore: new MemoryStateStore(),
      registrationTimeoutMs: 10_000,
      maxBufferedEvents: 1,
      generateAgentId: () => `vm-${++n}`,
      onEvent: (event) => events.push(event),
      sweeps: { leftovers: async () => ({ removedAgents: ['vm-0'] }) },
    });
    backend.attach(manager);
    const scale = (jobId: string) => manager.requestScale({ jobId, labels: ['linux'] });

    // spawning, spawned, registered, busy (after events-dropped), idle, destroying, destroyed
    const first = await scale('job-1');
    expect(first.kind).toBe('spawned');
    const id = (first as { agentId: string }).agentId;
    manager.onAgentRegistered(id, ['linux']);
    manager.correlateAgentToJob(id, 'run-1', 'job-1');
    manager.onJobComplete(id);
    await manager.drain(id);
    // a spawn that fails: spawn-failed, backoff-opened; then backoff-closed on a registration
    backend.failNext(1);
    expect((await scale('job-2')).kind).toBe('spawn-failed');
    await clock.advance(1000);
    const third = (await scale('job-3')) as { agentId: string };
    manager.onAgentRegistered(third.agentId, ['linux']);
    manager.onAgentDisconnected(third.agentId);
    // a spawn that never registers: pruned
    await scale('job-4');
    await clock.advance(11_000);
    await manager.maintain();
    // reconcile with a sweep: swept
    await manager.reconcile();
    await manager.shutdownAll({ timeoutMs: 1000 });

    const seen = new Set(events.filter((e) => e.source === 'manager').map((e) => e.kind));
    const listed = new Set<string>(SCALER_EVENT_KINDS);
    expect([...seen].filter((kind) => !listed.has(kind))).toEqual([]);
    // The scenario did reach the paths it means to.
    for (const kind of [
      'spawning',
      'spawned',
      'registered',
      'busy',
      'idle',
      'destroying',
      'destroyed',
      'spawn-failed',
      'backoff-opened',
      'disconnected',
      'pruned',
      'swept',
    ]) {
      expect(seen, kind).toContain(kind);
    }
  }, 60_000);

  it('every kind an emit site in src/manager names is listed, and every listed kind is emitted', () => {
    const named = new Set<string>();
    const computed: string[] = [];
    for (const file of ts.sys.readDirectory(join(root, 'src/manager'), ['.ts'])) {
      const text = readFileSync(file, 'utf8');
      const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
      const visit = (node: ts.Node): void => {
        if (ts.isCallExpression(node)) {
          const callee = node.expression;
          const name = ts.isPropertyAccessExpression(callee) ? callee.name.text : undefined;
          const kind = node.arguments[1];
          if ((name === 'emitFor' || name === 'emitGeneral') && kind !== undefined) {
            if (ts.isStringLiteral(kind)) named.add(kind.text);
            else computed.push(`${file}: ${kind.getText(source)}`);
          }
        }
        // The events-dropped event is built whole by the relay's correlate callback.
        if (
          ts.isPropertyAssignment(node) &&
          node.name.getText(source) === 'kind' &&
          ts.isStringLiteral(node.initializer) &&
          node.initializer.text === 'events-dropped'
        ) {
          named.add('events-dropped');
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    // The one computed kind: the lease watch passes the ledger's event type, narrowed to these three.
    expect(computed.map((site) => site.replace(/^.*\/src\/manager\//, ''))).toEqual([
      'capacity/leases.ts: type',
    ]);
    for (const kind of ['lease-at-risk', 'lease-lost', 'lease-renewed']) named.add(kind);
    expect([...named].sort()).toEqual([...SCALER_EVENT_KINDS].sort());
  });
});

describe('docs/manager.md lists the event kinds', () => {
  it('its events table names exactly SCALER_EVENT_KINDS, in order', () => {
    const page = readFileSync(join(root, 'docs/manager.md'), 'utf8');
    const start = page.indexOf('<!-- event-kinds:start');
    const end = page.indexOf('<!-- event-kinds:end -->');
    expect(start).toBeGreaterThan(0);
    expect(end).toBeGreaterThan(start);
    const kinds = page
      .slice(start, end)
      .split('\n')
      .map((line) => /^\| `([a-z-]+)`/.exec(line)?.[1])
      .filter((kind) => kind !== undefined);
    expect(kinds).toEqual([...SCALER_EVENT_KINDS]);
  });
});
