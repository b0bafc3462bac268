// `npm test` needs redis-server (the shared rate-limit tests) and Chromium
// (the status page's browser test, driven by playwright-core). On a fresh
// Debian machine, as root, install what is missing from Debian's archive;
// otherwise say how.
import { execSync } from 'node:child_process';

/** Debian package -> the command it provides. */
const TOOLS = [
  ['redis-server', 'redis-server'],
  ['chromium', 'chromium'],
];

const have = (cmd) => {
  try {
    execSync(`command -v ${cmd}`, { stdio: 'ignore', shell: '/bin/sh' });
    return true;
  } catch {
    return false;
  }
};
const missing = TOOLS.filter(([, cmd]) => !have(cmd)).map(([pkg]) => pkg);
if (missing.length > 0) {
  const list = missing.join(' ');
  if (process.getuid?.() === 0) {
    console.error(`missing: ${list}; installing with apt-get (Debian packages ${list})`);
    execSync(`apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${list}`, { stdio: 'inherit', shell: '/bin/sh' });
  } else {
    console.error(`missing: ${list}; run \`sudo apt-get install -y ${list}\`, then npm test again`);
    process.exit(1);
  }
}
