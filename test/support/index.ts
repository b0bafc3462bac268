// The test stand-ins, for tests and the demo (no test framework imported here).
export * from './anvil.ts';
export * from './recording-proxy.ts';
export * from './blockbook-stub.ts';
export * from './rosetta-stub.ts';
export * from './paths.ts';
export { isHealthCheck, HEALTH_AGENT_PREFIX, type Recorded } from './http.ts';
