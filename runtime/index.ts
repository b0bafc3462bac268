// What generated code may use from the runtime.
export { main } from './main.ts';
export { Gateway } from './server.ts';
export type * from './types.ts';
