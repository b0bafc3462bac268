// The gateway's version (package.json "version"). `gateway build` puts it into
// the server file (esbuild define, generator/bundle.ts), so the file needs no
// package.json at runtime; run from source (tests in-process), it reads 'dev'.
declare const __GATEWAY_VERSION__: string | undefined;

export const VERSION: string = typeof __GATEWAY_VERSION__ === 'string' ? __GATEWAY_VERSION__ : 'dev';
