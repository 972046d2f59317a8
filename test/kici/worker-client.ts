import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

const worker = join(import.meta.dirname, '../fixtures/kici/ledger-worker.ts');
const tsx = join(import.meta.dirname, '../../node_modules/tsx/dist/esm/index.mjs');

/** One answer line of test/fixtures/kici/ledger-worker.ts. */
export type Answer = { event: string; [key: string]: unknown };

/** A ledger worker process driven over stdin/stdout, optionally as another user. */
export class LedgerWorker {
  private readonly child: ChildProcess;
  private buffer = '';
  private stderr = '';
  private readonly queue: Answer[] = [];
  private waiter: (() => void) | undefined;
  private exited = false;

  constructor(config: object, as?: { uid: number; gid: number; env: NodeJS.ProcessEnv }) {
    const command = [process.execPath, '--import', tsx, worker, JSON.stringify(config)];
    const argv = as
      ? ['setpriv', `--reuid=${as.uid}`, `--regid=${as.gid}`, '--clear-groups', ...command]
      : command;
    this.child = spawn(argv[0]!, argv.slice(1), {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: as?.env ?? process.env,
    });
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.buffer += chunk;
      let newline = this.buffer.indexOf('\n');
      while (newline >= 0) {
        this.queue.push(JSON.parse(this.buffer.slice(0, newline)) as Answer);
        this.buffer = this.buffer.slice(newline + 1);
        newline = this.buffer.indexOf('\n');
      }
      this.waiter?.();
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.child.on('exit', () => {
      this.exited = true;
      this.waiter?.();
    });
  }

  /** The next answer line (rejects when the process exits first or after `timeoutMs`). */
  async next(timeoutMs = 60_000): Promise<Answer> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length === 0) {
      if (this.exited) throw new Error(`worker exited; stderr: ${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`worker timed out; stderr: ${this.stderr}`);
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
        setTimeout(resolve, 200);
      });
    }
    const answer = this.queue.shift()!;
    if (answer.event === 'error') throw new Error(`worker error: ${String(answer.message)}`);
    return answer;
  }

  /** Send one command and return its answer. */
  async call(command: object, timeoutMs?: number): Promise<Answer> {
    this.child.stdin!.write(`${JSON.stringify(command)}\n`);
    return this.next(timeoutMs);
  }

  /** Send one command without waiting; collect the answer later with `next()`. */
  send(command: object): void {
    this.child.stdin!.write(`${JSON.stringify(command)}\n`);
  }

  /** Kill the process if it is still running. */
  kill(): void {
    if (!this.exited) this.child.kill('SIGKILL');
  }
}
