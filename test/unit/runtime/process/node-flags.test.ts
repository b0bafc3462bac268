// What the gateway reads of node's command line about V8's memory reducer,
// and what its cluster primary gives the workers.
import { describe, expect, it } from 'vitest';
import { memoryReducerFlag, workerExecArgv } from '../../../../runtime/process/node-flags.ts';

describe('memoryReducerFlag', () => {
  it('is off with --no-memory-reducer, in each spelling node hands on to V8', () => {
    expect(memoryReducerFlag(['--no-memory-reducer'])).toBe('off');
    expect(memoryReducerFlag(['--no_memory_reducer'])).toBe('off');
    expect(memoryReducerFlag(['--nomemory-reducer'])).toBe('off');
  });

  it('is the default when the command line does not name it', () => {
    expect(memoryReducerFlag([])).toBe('default');
    expect(memoryReducerFlag(['--max-old-space-size=512', '--memory-reducer-for-small-heaps'])).toBe('default');
  });

  it('follows the last of the two, as V8 does', () => {
    expect(memoryReducerFlag(['--no-memory-reducer', '--memory-reducer'])).toBe('on');
    expect(memoryReducerFlag(['--memory-reducer', '--no-memory-reducer'])).toBe('off');
  });
});

describe('workerExecArgv', () => {
  it('adds --no-memory-reducer to the primary’s options when they do not name it', () => {
    expect(workerExecArgv(['--max-old-space-size=512'])).toEqual(['--max-old-space-size=512', '--no-memory-reducer']);
  });

  it('keeps the primary’s options as they are when they name it either way', () => {
    expect(workerExecArgv(['--no-memory-reducer'])).toEqual(['--no-memory-reducer']);
    expect(workerExecArgv(['--memory-reducer'])).toEqual(['--memory-reducer']);
  });

  it('does not change the list it is given', () => {
    const argv = ['--trace-gc'];
    workerExecArgv(argv);
    expect(argv).toEqual(['--trace-gc']);
  });
});
