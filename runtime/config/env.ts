import type { Template } from '../types.ts';

export class MissingEnvError extends Error {
  readonly code = 'GW_CFG_MISSING_ENV';
  constructor(readonly variable: string, readonly where: string) {
    super(`${where}: environment variable ${variable} is not set and has no default`);
  }
}

/**
 * Resolves `${VAR}` / `${VAR:-default}` parts at start-up. `where` names the
 * chain or listener for the error message. An empty variable counts as unset
 * for `:-`, as in the shell.
 */
export function resolveTemplate(t: Template, where: string, env: NodeJS.ProcessEnv = process.env): string {
  let out = '';
  for (const part of t.parts) {
    if (typeof part === 'string') {
      out += part;
      continue;
    }
    const value = env[part.env];
    if (value !== undefined && value !== '') out += value;
    else if (part.default !== undefined) out += part.default;
    else throw new MissingEnvError(part.env, where);
  }
  return out;
}

/** cache.redis needs somewhere to share: REDIS_URL, checked at start like every other setting. */
export function requiredRedisUrl(): string {
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('the manifest sets cache.redis: true, but REDIS_URL is not set');
  return url;
}

/**
 * Where keys come from: GATEWAY_KEYS, else GATEWAY_KEYS_FILE, else the
 * manifest's `keys:` with its ${VAR} parts resolved now: a file path, or a
 * redis:// or rediss:// URL for the key store.
 */
export function keysSource(manifestKeys: Template): string {
  return process.env.GATEWAY_KEYS ?? process.env.GATEWAY_KEYS_FILE ?? resolveTemplate(manifestKeys, 'keys');
}
