#!/usr/bin/env node
// The `gateway` CLI. It runs the TypeScript sources through tsx, so it works
// right after `npm ci`, without a build step.
import { register } from 'tsx/esm/api';

register();
await import('../generator/cli.ts');
