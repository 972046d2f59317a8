import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 to a local NATS port that can lose one answer: after
 * `dropAfter(subject)`, the next message the client publishes on `subject`
 * reaches the server, but nothing the server sends back on that connection
 * reaches the client, and the connection is then reset (the client reconnects
 * through the proxy). A write that landed without an answer, on demand.
 */
export interface AckDropProxy {
  /** `nats://127.0.0.1:<port>` of the proxy. */
  url: string;
  /** Arm the drop; resolves true once a publish on `subject` went through it. */
  dropAfter(subject: string): Promise<boolean>;
  close(): Promise<void>;
}

/** Start a proxy to `127.0.0.1:<targetPort>`. */
export async function startAckDropProxy(targetPort: number): Promise<AckDropProxy> {
  const sockets = new Set<Socket>();
  let armed: { marker: string; done: (hit: boolean) => void } | undefined;
  const server: Server = createServer((client) => {
    const upstream = tcpConnect({ host: '127.0.0.1', port: targetPort });
    sockets.add(client);
    sockets.add(upstream);
    let muted = false;
    let tail = '';
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      if (!armed || muted) return;
      const text = tail + chunk.toString('latin1');
      tail = text.slice(-256);
      // A publish (`PUB <subject> ...` or `HPUB <subject> ...`) on the subject.
      if (!text.includes(armed.marker)) return;
      const { done } = armed;
      armed = undefined;
      muted = true;
      // Let the server act on it, then reset the connection: its answer is lost.
      setTimeout(() => {
        drop();
        done(true);
      }, 300);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!muted) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no proxy port');
  return {
    url: `nats://127.0.0.1:${address.port}`,
    dropAfter(subject) {
      return new Promise((resolve) => {
        armed = { marker: `PUB ${subject}`, done: resolve };
      });
    },
    close() {
      armed?.done(false);
      armed = undefined;
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
