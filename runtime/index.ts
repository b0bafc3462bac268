// What generated code may use from the runtime.
export { main, Gateway } from './server.ts';
export type * from './types.ts';
