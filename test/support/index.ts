export * from './anvil.ts';
export * from './recording-proxy.ts';
export * from './blockbook-stub.ts';
export * from './rosetta-stub.ts';
export * from './paths.ts';
