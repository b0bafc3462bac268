// `npm test` needs redis-server (the shared rate-limit tests). On a fresh
// Debian machine, as root, install it from Debian's archive; otherwise say how.
import { execSync } from 'node:child_process';

const have = () => {
  try {
    execSync('command -v redis-server', { stdio: 'ignore', shell: '/bin/sh' });
    return true;
  } catch {
    return false;
  }
};
if (!have()) {
  if (process.getuid?.() === 0) {
    console.error('redis-server is missing: installing it with apt-get (Debian package redis-server)');
    execSync('apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server', { stdio: 'inherit', shell: '/bin/sh' });
  } else {
    console.error('redis-server is missing: run `sudo apt-get install -y redis-server`, then npm test again');
    process.exit(1);
  }
}
