import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A nats-server started by a test on a loopback port, with its own temp store dir. */
export interface NatsServer {
  /** `nats://127.0.0.1:<port>` */
  url: string;
  port: number;
  clusterPort?: number;
  storeDir: string;
  process: ChildProcess;
  /** Stop the server (SIGTERM, then SIGKILL) and remove its store dir unless keepStore. */
  stop(opts?: { keepStore?: boolean }): Promise<void>;
  /** SIGKILL the server without cleaning up (for crash tests). */
  kill(): Promise<void>;
}

/** A free TCP port on 127.0.0.1, chosen by the kernel. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        reject(new Error('no port'));
        return;
      }
      const { port } = address;
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, deadlineMs: number): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = tcpConnect({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nats-server did not listen on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface StartNatsOptions {
  /** Reuse a port (to restart a stopped server on the same address). */
  port?: number;
  /** Reuse a store dir (to restart with its data). */
  storeDir?: string;
  /** Cluster settings for a multi-node JetStream cluster on loopback. */
  cluster?: { name: string; port: number; routes: number[]; serverName: string };
  /** Enable JetStream (`-js`). Default true; false starts a plain core NATS server. */
  jetstream?: boolean;
  /**
   * Server configuration text (e.g. accounts and user permissions), written to a file
   * in the store dir and passed with `-c`; the address, port and store dir flags still apply.
   */
  config?: string;
}

/**
 * Start `nats-server -js` (or plain nats-server with `jetstream: false`) on 127.0.0.1 with a
 * temp store dir. A port picked by {@link freePort} can be taken by another process before
 * the server binds it (the suite runs test files in parallel): when the server then fails
 * with "address already in use", it is started again on other free ports (a few times).
 */
export async function startNatsServer(opts: StartNatsOptions = {}): Promise<NatsServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts);
    } catch (error) {
      if (opts.port !== undefined || attempt >= 5 || !portTaken(error)) throw error;
    }
  }
}

/**
 * Start a JetStream cluster of `size` servers on loopback (routes between them on free
 * ports); started again on other ports when a port was taken before a server bound it.
 */
export async function startNatsCluster(name: string, size = 3): Promise<NatsServer[]> {
  for (let attempt = 1; ; attempt++) {
    const routes: number[] = [];
    for (let i = 0; i < size; i++) routes.push(await freePort());
    const started = await Promise.allSettled(
      routes.map((port, i) =>
        startNatsServer({ cluster: { name, port, routes, serverName: `n${i}` } }),
      ),
    );
    const servers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed === undefined) return servers;
    await Promise.all(servers.map((server) => server.stop()));
    if (attempt >= 5 || !portTaken(failed.reason)) throw failed.reason;
  }
}

function portTaken(error: unknown): boolean {
  return error instanceof Error && error.message.includes('address already in use');
}

async function startOnce(opts: StartNatsOptions): Promise<NatsServer> {
  const port = opts.port ?? (await freePort());
  const storeDir = opts.storeDir ?? (await mkdtemp(join(tmpdir(), 'sp-nats-')));
  const args = ['-a', '127.0.0.1', '-p', String(port), '-sd', storeDir];
  if (opts.jetstream !== false) args.unshift('-js');
  if (opts.config !== undefined) {
    const file = join(storeDir, 'server.conf');
    await writeFile(file, opts.config);
    args.unshift('-c', file);
  }
  if (opts.cluster) {
    args.push(
      '--cluster_name',
      opts.cluster.name,
      '--cluster',
      `nats://127.0.0.1:${opts.cluster.port}`,
      '--routes',
      opts.cluster.routes.map((p) => `nats://127.0.0.1:${p}`).join(','),
      '-n',
      opts.cluster.serverName,
    );
  }
  const child = spawn('nats-server', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8192);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitForPort(port, 10_000);
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`nats-server failed to start: ${stderr}`, { cause: error });
  }
  const server: NatsServer = {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    process: child,
    async stop({ keepStore = false } = {}) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      if (!keepStore && opts.storeDir === undefined) {
        await rm(storeDir, { recursive: true, force: true });
      }
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
  if (opts.cluster) server.clusterPort = opts.cluster.port;
  return server;
}
