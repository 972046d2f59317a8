/**
 * The combining channel and the holder's plan, in one process on a real temp
 * directory: posting, claiming and withdrawing (exactly one wins), FIFO order
 * of parts, answers split back per sender, staged answers, and what a waiter
 * makes of an answer that is not complete yet or does not decode.
 */

import * as nodeFs from 'node:fs';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { emptyDocument } from '../../src/ledger/document/codec.js';
import { answerIn, publishStaged, stageAnswers } from '../../src/ledger/file/combining/answers.js';
import {
  claimPending,
  combineDirPath,
  prepareCombineDir,
  sweepCombineLeftovers,
} from '../../src/ledger/file/combining/channel.js';
import { answerTexts, planCombined, splitAnswers } from '../../src/ledger/file/combining/plan.js';
import { Inbox, PostedRequest, redo } from '../../src/ledger/file/combining/waiter.js';
import type { LedgerOp, OpAnswer } from '../../src/ledger/ops.js';

let dir: string;
let combine: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-combine-unit-'));
  combine = combineDirPath(join(dir, 'p.lock'));
  expect(prepareCombineDir(nodeFs, combine)).toBe(true);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const row = (agentId: string, leaseId: string) => ({
  instanceId: `i-${leaseId}`,
  pid: 1,
  bootId: 'b',
  agentId,
  cpus: 1,
  memBytes: 0,
  reservedAt: 1,
  leaseId,
});
const reserve = (agentId: string, leaseId: string): LedgerOp => ({
  kind: 'reserve',
  row: row(agentId, leaseId),
});

function post(leaseId: string, stamp: number, ops: LedgerOp[]) {
  const inbox = Inbox.open(nodeFs, combine, leaseId)!;
  const request = PostedRequest.post(
    nodeFs,
    combine,
    inbox,
    { stamp, instanceId: `i-${leaseId}`, leaseId, fsync: true, held: [], registered: true },
    { pool: 'p', cap: { maxCpu: 2 }, ops },
    1 << 20,
  )!;
  expect(request).toBeDefined();
  return { inbox, request };
}

describe('combining channel', () => {
  it('the combining directory is refused when others can write it', () => {
    const other = join(dir, '.q.combine');
    mkdirSync(other, { mode: 0o777 });
    nodeFs.chmodSync(other, 0o777);
    expect(prepareCombineDir(nodeFs, other)).toBe(false);
  });

  it('claim and withdraw: exactly one wins', () => {
    const a = post('lease-a', 1000, [reserve('a', 'lease-a')]);
    const b = post('lease-b', 1001, [reserve('b', 'lease-b')]);
    expect(a.request.withdraw()).toBe('withdrawn');
    const claimed = claimPending(nodeFs, combine, 'p', 1 << 20, 10_000);
    expect(claimed.map((c) => c.envelope?.leaseId)).toEqual(['lease-b']);
    expect(b.request.withdraw()).toBe('claimed');
    // Claimed means gone: a second holder finds nothing.
    expect(claimPending(nodeFs, combine, 'p', 1 << 20, 10_000)).toEqual([]);
    a.inbox.close();
    b.inbox.close();
  });

  it('requests are hard links to one request file per instance, rewritten only while no request links it', () => {
    const inbox = Inbox.open(nodeFs, combine, 'lease-r')!;
    const postAs = (stamp: number, agentId: string) =>
      PostedRequest.post(
        nodeFs,
        combine,
        inbox,
        { stamp, instanceId: 'i-r', leaseId: 'lease-r', fsync: true, held: [], registered: true },
        { pool: 'p', cap: { maxCpu: 2 }, ops: [reserve(agentId, 'lease-r')] },
        1 << 20,
      )!;
    const file = join(combine, 'lease-r.post');
    const first = postAs(1000, 'first-agent-with-a-long-name');
    const firstReq = join(combine, `${first.id}.req`);
    expect(statSync(firstReq).ino).toBe(statSync(file).ino);
    expect(statSync(file).nlink).toBe(2);
    // Claimed by a holder: the next request reuses the file, with only its own text.
    expect(claimPending(nodeFs, combine, 'p', 1 << 20, 10_000)).toHaveLength(1);
    const second = postAs(2000, 'b');
    const secondReq = join(combine, `${second.id}.req`);
    expect(statSync(secondReq).ino).toBe(statSync(file).ino);
    expect(readFileSync(secondReq, 'utf8')).not.toContain('first-agent');
    // Still posted (nobody claimed it): the next request gets a new file, the posted one keeps its text.
    const text = readFileSync(secondReq, 'utf8');
    const third = postAs(3000, 'c');
    const thirdReq = join(combine, `${third.id}.req`);
    expect(statSync(thirdReq).ino).not.toBe(statSync(secondReq).ino);
    expect(readFileSync(secondReq, 'utf8')).toBe(text);
    expect(
      claimPending(nodeFs, combine, 'p', 1 << 20, 10_000).map((c) =>
        c.request?.ops.map((op) => (op.kind === 'reserve' ? op.row.agentId : '')),
      ),
    ).toEqual([['b'], ['c']]);
    inbox.close();
    expect(readdirSync(combine)).toEqual([]);
  });

  it('a request file that others can write is replaced, never written through', () => {
    const file = join(combine, 'lease-m.post');
    writeFileSync(file, 'planted\n');
    nodeFs.chmodSync(file, 0o666);
    // Held open: the planted file lives on (and keeps its inode) once replaced.
    const planted = nodeFs.openSync(file, 'r');
    const { inbox, request } = post('lease-m', 1000, [reserve('m', 'lease-m')]);
    const posted = join(combine, `${request.id}.req`);
    expect(statSync(posted).ino).not.toBe(nodeFs.fstatSync(planted).ino);
    expect(statSync(posted).mode & 0o777).toBe(0o600);
    expect(readFileSync(posted, 'utf8')).not.toContain('planted');
    expect(readFileSync(planted, 'utf8')).toBe('planted\n');
    nodeFs.closeSync(planted);
    inbox.close();
  });

  it('a holder that read a request its waiter then withdrew and posted again claims neither', () => {
    const a = post('lease-w', 1000, [reserve('old', 'lease-w')]);
    let next: PostedRequest | undefined;
    // After the holder opened the request and before it reads it, the waiter
    // withdraws it and posts its next batch: the holder reads the next batch's
    // text through the old name, and its claim (the unlink of that name) fails.
    const racing = new Proxy(nodeFs, {
      get(target, key) {
        if (key !== 'readSync') return Reflect.get(target, key);
        return (...args: Parameters<typeof nodeFs.readSync>) => {
          if (next === undefined) {
            expect(a.request.withdraw()).toBe('withdrawn');
            next = PostedRequest.post(
              nodeFs,
              combine,
              a.inbox,
              {
                stamp: 2000,
                instanceId: 'i-lease-w',
                leaseId: 'lease-w',
                fsync: true,
                held: [],
                registered: true,
              },
              { pool: 'p', cap: { maxCpu: 2 }, ops: [reserve('new', 'lease-w')] },
              1 << 20,
            );
          }
          return target.readSync(...args);
        };
      },
    });
    expect(claimPending(racing, combine, 'p', 1 << 20, 10_000)).toEqual([]);
    // The new request is still posted, whole, for the next holder.
    expect(next).toBeDefined();
    const claimed = claimPending(nodeFs, combine, 'p', 1 << 20, 10_000);
    expect(claimed.map((c) => c.id)).toEqual([next!.id]);
    expect(
      claimed[0]!.request?.ops.map((op) => (op.kind === 'reserve' ? op.row.agentId : '')),
    ).toEqual(['new']);
    a.inbox.close();
  });

  it('the plan applies parts in start order, the holder among them, and splits answers back', () => {
    const late = post('lease-late', 3000, [reserve('late', 'lease-late')]);
    const early = post('lease-early', 1000, [reserve('early', 'lease-early')]);
    const remote = claimPending(nodeFs, combine, 'p', 1 << 20, 10_000);
    const own = { stamp: 2000, ops: [reserve('own', 'lease-own')], lost: undefined, fsync: true };
    const base = emptyDocument({ maxCpu: 2 });
    const plan = planCombined(own, remote, base, { pool: 'p', location: 'test' });
    expect(plan.ops.map((op) => (op.kind === 'reserve' ? op.row.agentId : op.kind))).toEqual([
      'early',
      'own',
      'late',
    ]);
    const answers: OpAnswer[] = [
      { ok: true as const, kind: 'reserve' as const, value: { ok: true as const } },
      { ok: true as const, kind: 'reserve' as const, value: { ok: true as const } },
      {
        ok: true as const,
        kind: 'reserve' as const,
        value: {
          ok: false as const,
          pool: 'p',
          dimension: 'cpu',
          requested: 1,
          used: 2,
          max: 2,
          neverFits: false,
        },
      },
    ];
    const split = splitAnswers(plan, answers);
    expect(split[plan.parts.indexOf(own)]).toEqual([answers[1]]);
    // Staged in one file, then linked into each waiter's inbox: each reads its own share.
    const texts = answerTexts(plan, split);
    const staged = stageAnswers(nodeFs, combine, texts);
    expect(staged).toMatch(/\.pre$/);
    publishStaged(nodeFs, combine, staged, texts);
    expect(nodeFs.lstatSync(staged!).nlink).toBe(3);
    expect(late.request.answer()?.reply).toEqual({ kind: 'answers', answers: [answers[2]] });
    expect(early.request.answer()?.reply).toEqual({ kind: 'answers', answers: [answers[0]] });
    expect(readdirSync(late.inbox.path)).toEqual([]);
    expect(nodeFs.lstatSync(staged!).nlink).toBe(1);
    // Without a staged file (it could not be written), each answer is created alone.
    const again = post('lease-again', 4000, [reserve('again', 'lease-again')]);
    publishStaged(
      nodeFs,
      combine,
      undefined,
      new Map([[again.request.id, texts.get(late.request.id)!]]),
    );
    expect(again.request.answer()?.reply).toEqual({ kind: 'answers', answers: [answers[2]] });
  });

  it('a claimed request with another cap is not planned: its sender does its calls itself', () => {
    post('lease-x', 1000, [reserve('x', 'lease-x')]);
    const remote = claimPending(nodeFs, combine, 'p', 1 << 20, 10_000);
    const base = emptyDocument({ maxCpu: 8 });
    const own = { stamp: 2000, ops: [], lost: undefined, fsync: false };
    const plan = planCombined(own, remote, base, { pool: 'p', location: 'test' });
    expect(plan.refused).toHaveLength(1);
    expect(plan.ops).toEqual([]);
  });

  it('a waiter reads its answer once it is complete; one that does not decode, or answers a value of the wrong shape, is settled from the pool file', () => {
    const { inbox, request } = post('lease-w', 1000, [reserve('w', 'lease-w')]);
    claimPending(nodeFs, combine, 'p', 1 << 20, 10_000);
    expect(request.answer()).toBeUndefined();
    const file = join(inbox.path, `${request.id}.ans`);
    // Created, not written yet (or cut short): left where it is for the next look.
    writeFileSync(file, '');
    expect(request.answer()).toBeUndefined();
    writeFileSync(file, '{"v":1');
    expect(request.answer()).toBeUndefined();
    expect(readdirSync(inbox.path)).toEqual([`${request.id}.ans`]);
    writeFileSync(file, 'garbage\n');
    const answer = request.answer();
    // Its holder may have written the call before it answered garbage.
    expect(answer?.reply).toMatchObject({ kind: 'direct', maybeApplied: [true] });
    expect(readdirSync(inbox.path)).toEqual([]);
    inbox.close();
  });

  it('an answer granting a reserve with ids it did not ask for is not taken', () => {
    const { inbox, request } = post('lease-v', 1000, [reserve('v', 'lease-v')]);
    claimPending(nodeFs, combine, 'p', 1 << 20, 10_000);
    const file = join(inbox.path, `${request.id}.ans`);
    const value = { ok: true, devices: { 'nvidia.com/gpu': ['0 --privileged'] } };
    writeFileSync(
      file,
      `${JSON.stringify({ v: 1, lost: null })}\n${JSON.stringify({ v: 1, kind: 'answers', answers: [{ ok: true, value }] })}\n`,
    );
    const answer = request.answer();
    expect(answer?.reply).toMatchObject({
      kind: 'direct',
      maybeApplied: [true],
      reason: expect.stringMatching(/did not decode \(answer 0: devices of "nvidia.com\/gpu"/),
    });
    inbox.close();
  });

  it('a staged answer tells a redone release that the killed holder found its row', () => {
    const { inbox, request } = post('lease-r', 1000, [
      { kind: 'release', agentId: 'r', instanceId: 'i-lease-r' },
    ]);
    claimPending(nodeFs, combine, 'p', 1 << 20, 10_000);
    const text = `${JSON.stringify({ v: 1, lost: null })}\n${JSON.stringify({ v: 1, kind: 'answers', answers: [{ ok: true, value: true }] })}\n`;
    // Another cycle's staged file, and a file that is not one, beside it.
    expect(stageAnswers(nodeFs, combine, new Map([['other', text]]))).toBeDefined();
    writeFileSync(join(combine, 'junk.pre'), 'not json');
    expect(stageAnswers(nodeFs, combine, new Map([[request.id, text]]))).toBeDefined();
    const ops: LedgerOp[] = [{ kind: 'release', agentId: 'r', instanceId: 'i-lease-r' }];
    redo(ops, true, request.prepared());
    expect(ops[0]).toMatchObject({ maybeApplied: true, removedBefore: true });
    inbox.close();
  });

  it('the inbox wakes its waiter when an answer arrives', async () => {
    const { inbox } = post('lease-z', 1000, [reserve('z', 'lease-z')]);
    const started = performance.now();
    const waiting = inbox.wait(5_000);
    setTimeout(() => writeFileSync(join(inbox.path, 'x.ans'), '1'), 20);
    await waiting;
    expect(performance.now() - started).toBeLessThan(4_000);
    inbox.close();
  });

  it('a wait for one answer sleeps through other changes in the inbox, and wakes for its answer or a touch', async () => {
    const { inbox, request } = post('lease-y', 1000, [reserve('y', 'lease-y')]);
    const awaited = `${request.id}.ans`;
    // The removal of an answer already read (the waiter's own unlink) and a
    // late answer for another request wake nobody.
    writeFileSync(join(inbox.path, 'old.ans'), '1\n');
    let woken = false;
    const first = inbox.wait(60_000, awaited).then(() => {
      woken = true;
    });
    nodeFs.unlinkSync(join(inbox.path, 'old.ans'));
    writeFileSync(join(inbox.path, 'other.ans'), '1\n');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(woken).toBe(false);
    // Its own answer wakes it, and is reported (once) as there.
    expect(inbox.reported(awaited)).toBe(false);
    writeFileSync(join(inbox.path, awaited), '1\n');
    await Promise.race([first, new Promise((r) => setTimeout(r, 5_000))]);
    expect(woken).toBe(true);
    expect(inbox.reported('other.ans')).toBe(false);
    expect(inbox.reported(awaited)).toBe(true);
    expect(inbox.reported(awaited)).toBe(false);
    // So does a touch of the inbox (a releasing holder waking its oldest waiter).
    woken = false;
    const third = inbox.wait(60_000, awaited).then(() => {
      woken = true;
    });
    const seconds = Date.now() / 1000;
    nodeFs.utimesSync(inbox.path, seconds, seconds);
    await Promise.race([third, new Promise((r) => setTimeout(r, 5_000))]);
    expect(woken).toBe(true);
    inbox.close();
  });

  it('a waiter takes exactly its own entry from a staged file, whatever the other answers hold', () => {
    const id = fc
      .tuple(
        fc.integer({ min: 0, max: 10 ** 15 }),
        fc.stringMatching(/^[\w-]{1,12}$/),
        fc.stringMatching(/^[a-z0-9]{1,10}$/),
      )
      .map(([start, lease, random]) => `${String(start).padStart(17, '0')}.${lease}.${random}`);
    // Answer texts with quotes, backslashes, newlines and any code point.
    const text = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.constantFrom('"', '\\', '\\"', '":"', '\n'),
    );
    fc.assert(
      fc.property(fc.dictionary(id, text, { minKeys: 1, maxKeys: 8 }), id, (answers, other) => {
        const file = stageAnswers(nodeFs, combine, new Map(Object.entries(answers)))!;
        const staged = nodeFs.readFileSync(file, 'utf8');
        nodeFs.unlinkSync(file);
        for (const [key, value] of Object.entries(answers))
          expect(answerIn(staged, key)).toBe(value);
        if (!Object.hasOwn(answers, other)) expect(answerIn(staged, other)).toBeUndefined();
      }),
      { numRuns: 200 },
    );
    // An answer alone (two lines) is the answer itself.
    expect(answerIn('{"v":1,"lost":null}\n{"v":1}\n', 'x')).toBe('{"v":1,"lost":null}\n{"v":1}\n');
  });

  it('an answer that cannot be written whole (a full disk) leaves no file behind', () => {
    const { inbox, request } = post('lease-f', 1000, [reserve('f', 'lease-f')]);
    const claimed = claimPending(nodeFs, combine, 'p', 1 << 20, 10_000);
    expect(claimed.map((c) => c.id)).toEqual([request.id]);
    const full = {
      ...nodeFs,
      writeSync: () => {
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), {
          code: 'ENOSPC',
          syscall: 'write',
        });
      },
    } as unknown as typeof nodeFs;
    const text = `${JSON.stringify({ v: 1, lost: null })}\n${JSON.stringify({ v: 1, kind: 'answers', answers: [{ ok: true, value: { ok: true } }] })}\n`;
    // Neither the staged file nor the answer alone stays, empty, where a waiter would wait on it.
    expect(stageAnswers(full, combine, new Map([[request.id, text]]))).toBeUndefined();
    publishStaged(full, combine, undefined, new Map([[request.id, text]]));
    expect(readdirSync(combine).filter((name) => name.endsWith('.pre'))).toEqual([]);
    expect(readdirSync(inbox.path)).toEqual([]);
    inbox.close();
  });

  it('a sweep removes stale answers and the inboxes and request files of closed instances, never a posted request', () => {
    const live = post('lease-live', 1000, [reserve('l', 'lease-live')]);
    const gone = Inbox.open(nodeFs, combine, 'lease-gone')!;
    // A closed instance's request file, still linked by a request it posted.
    const orphan = post('lease-orphan', 2000, [reserve('o', 'lease-orphan')]);
    writeFileSync(join(dir, 'lease-live.lease'), '');
    writeFileSync(join(live.inbox.path, 'old.ans'), 'x\n');
    writeFileSync(join(gone.path, 'old.ans'), 'x\n');
    writeFileSync(join(combine, '1.x.pre'), 'x\n');
    const past = Date.now() / 1000 - 60;
    for (const path of [
      join(live.inbox.path, 'old.ans'),
      join(gone.path, 'old.ans'),
      join(combine, '1.x.pre'),
      join(combine, `${live.request.id}.req`),
      join(combine, `${orphan.request.id}.req`),
    ])
      nodeFs.utimesSync(path, past, past);
    writeFileSync(join(live.inbox.path, 'new.ans'), 'x\n');
    nodeFs.utimesSync(gone.path, past, past);
    nodeFs.utimesSync(orphan.inbox.path, past, past);
    sweepCombineLeftovers(nodeFs, combine, dir, 10_000);
    // The live instance keeps its request file; the closed one's goes, its posted request stays whole.
    expect(readdirSync(combine).sort()).toEqual([
      `${live.request.id}.req`,
      `${orphan.request.id}.req`,
      'lease-live',
      'lease-live.post',
    ]);
    expect(readFileSync(join(combine, `${orphan.request.id}.req`), 'utf8')).toContain('"o"');
    expect(readdirSync(live.inbox.path)).toEqual(['new.ans']);
    live.inbox.close();
    gone.close();
    orphan.inbox.close();
  });

  it('an inbox closed with answers left in it is removed with them', () => {
    const { inbox } = post('lease-c', 1000, [reserve('c', 'lease-c')]);
    writeFileSync(join(inbox.path, 'late.ans'), 'x\n');
    inbox.close();
    expect(readdirSync(combine).filter((name) => name === 'lease-c')).toEqual([]);
  });
});
