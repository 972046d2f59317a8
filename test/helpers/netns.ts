import { type ChildProcess, execFileSync, spawn } from 'node:child_process';

/** Run a command and return its stdout; throws with stderr on failure. */
export function run(file: string, args: string[], input?: string): string {
  return execFileSync(file, args, {
    encoding: 'utf8',
    stdio: ['pipe', 'pipe', 'pipe'],
    ...(input === undefined ? {} : { input }),
  });
}

/** Run a command inside a network namespace. */
export function inNs(ns: string, file: string, args: string[], input?: string): string {
  return run('ip', ['netns', 'exec', ns, file, ...args], input);
}

/**
 * Throwaway network namespaces with names unique to this process. `add` creates one with
 * its loopback up; `cleanup` deletes every namespace made (call it from afterAll).
 */
export class Namespaces {
  private readonly made: string[] = [];
  private readonly children: ChildProcess[] = [];

  constructor(private readonly prefix: string) {}

  /** Create `<prefix>-<pid>-<name>` and return its full name. */
  add(name: string): string {
    const full = `${this.prefix}-${process.pid}-${name}`;
    run('ip', ['netns', 'add', full]);
    this.made.push(full);
    run('ip', ['-n', full, 'link', 'set', 'lo', 'up']);
    return full;
  }

  /** Start a long-running process in a namespace; resolves once it prints `ready`. */
  async start(ns: string, file: string, args: string[]): Promise<ChildProcess> {
    const child = spawn('ip', ['netns', 'exec', ns, file, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.children.push(child);
    await new Promise<void>((resolve, reject) => {
      let out = '';
      let err = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('ready')) resolve();
      });
      child.stderr!.on('data', (chunk: Buffer) => {
        err += chunk.toString();
      });
      child.once('exit', (code) => reject(new Error(`${file} exited with ${code}: ${err}`)));
      child.once('error', reject);
    });
    return child;
  }

  /** Kill what `start` started and delete every namespace made. Never throws. */
  cleanup(): void {
    for (const child of this.children) {
      if (child.exitCode === null && child.pid !== undefined) {
        try {
          child.kill('SIGKILL');
        } catch {}
      }
    }
    for (const ns of this.made.splice(0).reverse()) {
      try {
        run('ip', ['netns', 'del', ns]);
      } catch {}
    }
  }
}
