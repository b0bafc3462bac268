// `npm test` needs redis-server (the shared rate-limit tests), Chromium
// (the status page's browser test, driven by playwright-core), nginx (issue
// 33's consistency oracle compares the gateway with nginx round-robin), and
// unshare, setpriv and ip (util-linux, iproute2: the Kubernetes test runs a pod
// in a network namespace of its own). On a fresh
// Debian machine, as root, install what is missing from Debian's archive;
// otherwise say how.
import { execSync } from 'node:child_process';

/** Debian package -> the command it provides (nginx is in /usr/sbin, not on every user's PATH). */
const TOOLS = [
  ['redis-server', 'redis-server'],
  ['chromium', 'chromium'],
  ['nginx', 'nginx', '/usr/sbin/nginx'],
  ['util-linux', 'unshare'],
  ['iproute2', 'ip', '/usr/sbin/ip', '/sbin/ip'],
];

const have = (cmd) => {
  try {
    execSync(`command -v ${cmd}`, { stdio: 'ignore', shell: '/bin/sh' });
    return true;
  } catch {
    return false;
  }
};
const missing = TOOLS.filter(([, ...cmds]) => !cmds.some(have)).map(([pkg]) => pkg);
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
