// Resolves the contract's `log` import for tests that run the plugin's source in Node:
// the host provides it in the sandbox; here it records messages in globalThis.airlockLog.
const shim = 'data:text/javascript,' + encodeURIComponent(
  'export function log(level, message) { (globalThis.airlockLog ??= []).push([level, message]); }',
);

export async function resolve(specifier, context, next) {
  if (specifier.startsWith('airlock:adapter/log')) return { url: shim, shortCircuit: true };
  return next(specifier, context);
}
