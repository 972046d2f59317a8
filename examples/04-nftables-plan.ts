/**
 * Print the nft transaction that isolates a build agent, without running nft and
 * without root. Run: npx tsx examples/04-nftables-plan.ts
 *
 * In your own code import from 'scaler-primitives/nftables'; then, as root (or with
 * `requireSudo: true`), `await addIsolationRules('ci-42', policy)` applies exactly this
 * text in one `nft -f -` transaction, and `removeIsolationRules('ci-42', { policy })`
 * takes it away again.
 */
import { ErrorCode, isScalerError } from 'scaler-primitives';
import { type IsolationPolicy, renderIsolationPlan } from 'scaler-primitives/nftables';

// A Firecracker VM behind tap-ci-42: it may reach a package mirror on the private
// network, the orchestrator on the host's port 8080 and DNS on the host, and nothing
// else on private ranges, link-local or the cloud metadata service.
const policy: IsolationPolicy = {
  iifname: 'tap-ci-42',
  allowlist: ['10.20.30.0/24'],
  hostAccess: [8080, { port: 53, protocol: 'udp' }, { port: 53, protocol: 'tcp' }],
};

console.log('# vmap layout (the default), including the one-time table skeleton:\n');
console.log(renderIsolationPlan('ci-42', policy, { includeTable: true }));

console.log('# the same agent in the seed-compatible `rules` layout:\n');
console.log(renderIsolationPlan('ci-42', policy, { layout: 'rules' }));

// kici's own table is `ip kici` (IPv4 only): the IPv6 parts of the policy are left out, and
// such a table does not filter IPv6 at all. scaler-primitives/kici writes rules of this shape.
console.log('# in a table of family `ip`, as kici keeps its rules (`ip kici`):\n');
console.log(renderIsolationPlan('ci-42', policy, { family: 'ip', table: 'kici', layout: 'rules' }));

// Anything that is not a plain interface name, address, port or uid is refused before
// it could reach nft:
for (const bad of ['eth0" ; flush ruleset ; "', 'veth*']) {
  try {
    renderIsolationPlan('ci-43', { iifname: bad });
  } catch (error) {
    if (isScalerError(error, ErrorCode.INVALID_INPUT)) console.log(`refused: ${error.message}`);
    else throw error;
  }
}
try {
  renderIsolationPlan('ci-44', { saddr: '172.30.0.5', allowlist: ['1.2.3.4/8'] });
} catch (error) {
  if (isScalerError(error, ErrorCode.INVALID_INPUT)) console.log(`refused: ${error.message}`);
  else throw error;
}
