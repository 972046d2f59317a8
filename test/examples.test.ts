import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, type NatsServer, startNatsServer } from './helpers/nats-server.js';
import { hasSystem } from './helpers/system.js';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..');
// 01-quickstart (the demo) is run and checked by test/manager/demo.test.ts.
const examples = readdirSync(join(root, 'examples')).filter(
  (f) => /^\d\d-.*\.ts$/.test(f) && !f.endsWith('.test.ts') && f !== '01-quickstart.ts',
);
// Examples that talk to NATS read NATS_URL: they run once without it (and must
// say how to get a server) and once against a real nats-server.
const needsNats = (file: string) =>
  readFileSync(join(root, 'examples', file), 'utf8').includes('NATS_URL');
const natsExamples = examples.filter(needsNats);

function runExample(file: string, env: NodeJS.ProcessEnv) {
  return run(process.execPath, ['--import', 'tsx', join('examples', file)], {
    cwd: root,
    env,
    timeout: 120_000,
  });
}

function withoutNats(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NATS_URL;
  return env;
}

describe('examples run as they are', () => {
  it('has examples', () => {
    expect(examples.length).toBeGreaterThan(0);
  });

  it.each(examples)('%s exits 0 and prints something (no NATS_URL)', async (file) => {
    const { stdout } = await runExample(file, withoutNats());
    expect(stdout.trim().length).toBeGreaterThan(0);
  });

  it.each(natsExamples)(
    '%s with NATS_URL at a closed port prints one line saying how to start a server, no stack',
    async (file) => {
      const port = await freePort();
      const failed = await runExample(file, {
        ...withoutNats(),
        NATS_URL: `nats://127.0.0.1:${port}`,
      }).then(
        () => undefined,
        (error: { code?: number; stderr?: string }) => error,
      );
      expect(failed?.code).toBe(1);
      const lines = (failed?.stderr ?? '').trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/nats-server -js/);
      expect(lines[0]).not.toMatch(/\bat .+:\d+:\d+/);
    },
  );
});

describe.runIf(natsExamples.length > 0 && hasSystem(['nats-server'], 'examples with NATS'))(
  'examples with a real nats-server',
  () => {
    let server: NatsServer;
    beforeAll(async () => {
      server = await startNatsServer();
    });
    afterAll(async () => {
      await server?.stop();
    });

    it.each(natsExamples)('%s exits 0 against nats-server -js', async (file) => {
      const { stdout } = await runExample(file, { ...withoutNats(), NATS_URL: server.url });
      expect(stdout.trim().length).toBeGreaterThan(0);
    });
  },
);

describe('examples/14-gpu-pools.ts', () => {
  it('hands out each GPU id once, waits naming the pool, then reuses the freed ids', async () => {
    const { stdout } = await runExample('14-gpu-pools.ts', withoutNats());
    const granted = [...stdout.matchAll(/--gpus device=([\d,]+) agent {2}# (\S+)/g)].map(
      ([, ids, agent]) => ({ agent, ids: ids!.split(',') }),
    );
    // train-a (2), infer (1), then train-b (2) on the ids train-a freed.
    expect(granted.map((g) => g.ids.length)).toEqual([2, 1, 2]);
    const firstTwo = granted.slice(0, 2).flatMap((g) => g.ids);
    expect(new Set(firstTwo).size).toBe(3);
    expect(granted[2]!.ids).toEqual(granted[0]!.ids);
    expect(stdout).toMatch(/train-b waits: pool gpu-box has 3 of 4 nvidia\.com\/gpu in use/);
    expect(stdout).toMatch(/host-1-cpu-\d+ +pools local +no GPU/);
    expect(stdout.match(/shut down, every row released/g)).toHaveLength(2);
  });
});
