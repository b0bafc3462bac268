// The V8 flag the gateway is meant to run with, and whether it does.
//
// V8's memory reducer shrinks the heap of a process that looks idle, and
// afterwards (by V8's source) leaves the heap growing slowly. With 35 s idle spells between
// 5 s of load, the gateway without the flag collected its old generation
// every ~65 ms (74-77 mark-compacts in 5 s of 200 KB answers, against 5-15
// with it) and served 0.64x the requests a second of the same file with the
// flag (0.83x on the small call); see bench/RESULTS.md, "The memory reducer".
// A gateway is idle between bursts by nature, so it runs without the reducer.
//
// V8 reads the flag when the heap is set up: `v8.setFlagsFromString` at run
// time does not undo the slow growth (measured), so it must be on the command
// line. The emitted file's first line (`#!/usr/bin/env -S node
// --no-memory-reducer`) does that for `./gateway.mjs`, the cluster primary
// does it for its workers, and `node --no-memory-reducer gateway.mjs` is the
// documented command. Started with plain `node gateway.mjs`, the gateway
// serves the same answers and says so once in its log.

export const NO_MEMORY_REDUCER = '--no-memory-reducer';

/**
 * What the command line says of the memory reducer: 'off', 'on' (asked for
 * explicitly) or 'default' (not mentioned: on). V8 takes the last one given.
 */
export function memoryReducerFlag(execArgv: readonly string[] = process.execArgv): 'off' | 'on' | 'default' {
  for (let i = execArgv.length - 1; i >= 0; i--) {
    const a = execArgv[i]!.replaceAll('_', '-');
    if (a === NO_MEMORY_REDUCER || a === '--nomemory-reducer') return 'off';
    if (a === '--memory-reducer') return 'on';
  }
  return 'default';
}

/**
 * Node options for a worker process: the parent's, with the memory reducer
 * off unless the parent's command line turned it on explicitly.
 */
export function workerExecArgv(execArgv: readonly string[] = process.execArgv): string[] {
  return memoryReducerFlag(execArgv) === 'default' ? [...execArgv, NO_MEMORY_REDUCER] : [...execArgv];
}
