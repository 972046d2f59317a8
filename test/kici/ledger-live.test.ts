/**
 * kici 0.9.1's own MachineLedger (cut from the published package at run time) and the
 * adapter's, in separate processes run as an unprivileged user, contending on one pool
 * with kici's default directory resolution.
 */
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kiciLedgerModule } from '../helpers/kici-ledger.js';
import { hasSystem } from '../helpers/system.js';
import { LedgerWorker } from './worker-client.js';

const NOBODY = 65534;
const POOL = 'shared-host';
const CAP = { maxCpu: 4, maxMemoryBytes: 4 * 2 ** 30 };

interface Row {
  instanceId: string;
  agentId: string;
  cpus: number;
  memBytes: number;
}

describe.runIf(hasSystem(['root'], 'kici ledger side by side (runs workers as nobody)'))(
  'kici 0.9.1 MachineLedger and the adapter on one host',
  () => {
    let home: string;
    let kici: LedgerWorker;
    let ours: LedgerWorker;
    let ledgerDir: string;

    beforeAll(async () => {
      const kiciModule = kiciLedgerModule();
      home = mkdtempSync(join(tmpdir(), 'sp-kici-live-'));
      chownSync(home, NOBODY, NOBODY);
      // As nobody: /var/lib is not writable, so both resolve $HOME/.local/state/kici/scaler-ledger.
      // KICI_MACHINE_LEDGER_DIR is read by kici's config loader, not by its ledger class:
      // both ledgers must ignore it.
      const env = {
        PATH: process.env.PATH,
        HOME: home,
        KICI_MACHINE_LEDGER_DIR: join(home, 'not-this-one'),
      };
      const as = { uid: NOBODY, gid: NOBODY, env };
      const config = { pool: POOL, cap: CAP, kiciModule };
      kici = new LedgerWorker({ ...config, impl: 'kici', instanceId: 'kici-orch' }, as);
      ours = new LedgerWorker({ ...config, impl: 'adapter', instanceId: 'adapter-orch' }, as);
      await kici.next();
      await ours.next();
      ledgerDir = join(home, '.local', 'state', 'kici', 'scaler-ledger');
    });

    afterAll(() => {
      kici?.kill();
      ours?.kill();
      if (home) rmSync(home, { recursive: true, force: true });
    });

    const rows = (): Row[] => {
      const file = join(ledgerDir, `${POOL}.json`);
      if (!existsSync(file)) return [];
      return (JSON.parse(readFileSync(file, 'utf8')) as { reservations: Row[] }).reservations;
    };

    it('resolves the same XDG directory as kici (and ignores KICI_MACHINE_LEDGER_DIR)', async () => {
      const answer = await ours.call({ op: 'dir' });
      expect(answer.dir).toBe(ledgerDir);
      // kici made the file there (its first write) and we read it: one pool, one file.
      expect(await kici.call({ op: 'reserve', agentId: 'probe', cpus: 1, memBytes: 1 })).toEqual({
        event: 'result',
        ok: true,
      });
      expect(rows().map((r) => r.instanceId)).toEqual(['kici-orch']);
      await kici.call({ op: 'release', agentId: 'probe' });
      expect(rows()).toEqual([]);
      expect(existsSync(join(home, 'not-this-one'))).toBe(false);
    });

    it('never over-commits the pool while both churn (independent reader)', async () => {
      const churn = { iterations: 60, cpus: 1.5, memBytes: 2 ** 30, holdMs: 5 };
      kici.send({ op: 'churn', prefix: 'k', ...churn });
      ours.send({ op: 'churn', prefix: 'a', ...churn });
      let maxCpu = 0;
      let maxMem = 0;
      let snapshots = 0;
      let both = 0;
      const done = Promise.all([kici.next(120_000), ours.next(120_000)]);
      let finished = false;
      done.then(
        () => {
          finished = true;
        },
        () => {
          finished = true;
        },
      );
      while (!finished) {
        let current: Row[];
        try {
          current = rows();
        } catch {
          continue; // a reader can race the rename only on the file's first creation
        }
        snapshots++;
        const cpu = current.reduce((s, r) => s + r.cpus, 0);
        const mem = current.reduce((s, r) => s + r.memBytes, 0);
        maxCpu = Math.max(maxCpu, cpu);
        maxMem = Math.max(maxMem, mem);
        if (new Set(current.map((r) => r.instanceId)).size === 2) both++;
        await new Promise((resolve) => setImmediate(resolve));
      }
      const [k, a] = await done;
      expect(maxCpu).toBeLessThanOrEqual(CAP.maxCpu);
      expect(maxMem).toBeLessThanOrEqual(CAP.maxMemoryBytes);
      // Both got capacity, both were refused at times, and they held rows side by side.
      expect(k!.granted as number).toBeGreaterThan(0);
      expect(a!.granted as number).toBeGreaterThan(0);
      expect((k!.granted as number) + (a!.granted as number)).toBe(
        120 - (k!.refused as number) - (a!.refused as number),
      );
      expect(snapshots).toBeGreaterThan(10);
      expect(both).toBeGreaterThan(0);
      expect(rows()).toEqual([]);
    });

    it('refuses what does not fit whoever holds the rest', async () => {
      expect((await kici.call({ op: 'reserve', agentId: 'k-big', cpus: 3, memBytes: 1 })).ok).toBe(
        true,
      );
      expect(
        (await ours.call({ op: 'reserve', agentId: 'a-big', cpus: 1.5, memBytes: 1 })).ok,
      ).toBe(false);
      expect(
        (await ours.call({ op: 'reserve', agentId: 'a-small', cpus: 1, memBytes: 1 })).ok,
      ).toBe(true);
      expect(
        (await kici.call({ op: 'reserve', agentId: 'k-more', cpus: 0.5, memBytes: 1 })).ok,
      ).toBe(false);
      await kici.call({ op: 'release', agentId: 'k-big' });
      await ours.call({ op: 'release', agentId: 'a-small' });
      expect(rows()).toEqual([]);
    });

    it('each releases only its own rows', async () => {
      // Our row for agent "same": kici's release of that id leaves it alone.
      expect((await ours.call({ op: 'reserve', agentId: 'same', cpus: 1, memBytes: 1 })).ok).toBe(
        true,
      );
      await kici.call({ op: 'release', agentId: 'same' });
      expect(rows().map((r) => `${r.instanceId}/${r.agentId}`)).toEqual(['adapter-orch/same']);
      // kici adds its own row for the same id (kici does not refuse duplicates).
      expect((await kici.call({ op: 'reserve', agentId: 'same', cpus: 1, memBytes: 1 })).ok).toBe(
        true,
      );
      // Our release removes our row only.
      await ours.call({ op: 'release', agentId: 'same' });
      expect(rows().map((r) => `${r.instanceId}/${r.agentId}`)).toEqual(['kici-orch/same']);
      // A second release of ours is a no-op: kici's row stays.
      await ours.call({ op: 'release', agentId: 'same' });
      expect(rows().map((r) => `${r.instanceId}/${r.agentId}`)).toEqual(['kici-orch/same']);
      await kici.call({ op: 'release', agentId: 'same' });
      expect(rows()).toEqual([]);
    });

    it('releaseAllForInstance on shutdown removes only the caller’s rows', async () => {
      expect((await ours.call({ op: 'reserve', agentId: 'a-1', cpus: 1, memBytes: 1 })).ok).toBe(
        true,
      );
      expect((await kici.call({ op: 'reserve', agentId: 'k-1', cpus: 1, memBytes: 1 })).ok).toBe(
        true,
      );
      await ours.call({ op: 'exit' });
      expect(rows().map((r) => `${r.instanceId}/${r.agentId}`)).toEqual(['kici-orch/k-1']);
      await kici.call({ op: 'exit' });
      expect(rows()).toEqual([]);
    });
  },
);
