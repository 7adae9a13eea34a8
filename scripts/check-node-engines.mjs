// Checks that the running Node.js satisfies the "engines.node" range of every
// package in the given package-lock.json files (lockfileVersion 2 or 3).
// Usage: node scripts/check-node-engines.mjs tests/ui/package-lock.json ...
// Prints one line per package that wants another Node version, naming the lock
// file, the package, its version and the range it accepts; exits 1 if any, 2 if
// a lock file cannot be read. Written for Node 18 with no npm package (runs
// before npm ci): the range grammar is the subset of semver npm's engines use
// (||, space-separated comparators, >= > <= < =, ^, ~, x-ranges, a - b).
import { readFileSync } from 'node:fs';

function parse(v) {
    const m = /^v?(\d+|[xX*])?(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?/.exec(v.trim());
    const num = (s) => (s === undefined || /[xX*]/.test(s) ? null : Number(s));
    return m ? [num(m[1]), num(m[2]), num(m[3])] : [null, null, null];
}
function cmp(a, b) {
    for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) < (b[i] ?? 0) ? -1 : 1;
    return 0;
}
// lowest version above every version matching a partial p (e.g. 18 -> 19.0.0)
function upper(p) {
    if (p[0] === null) return [Infinity, 0, 0];
    if (p[1] === null) return [p[0] + 1, 0, 0];
    if (p[2] === null) return [p[0], p[1] + 1, 0];
    return [p[0], p[1], p[2] + 1];
}
function comparator(c, v) {
    const m = /^(>=|<=|>|<|=|\^|~)?\s*(.*)$/.exec(c);
    const op = m[1] || '', p = parse(m[2]);
    const lo = p.map((x) => x ?? 0);
    switch (op) {
    case '>=': return cmp(v, lo) >= 0;
    case '>': return p[1] === null || p[2] === null ? cmp(v, upper(p)) >= 0 : cmp(v, lo) > 0;
    case '<=': return p[1] === null || p[2] === null ? cmp(v, upper(p)) < 0 : cmp(v, lo) <= 0;
    case '<': return cmp(v, lo) < 0;
    case '^': {
        const hi = p[0] !== 0 || p[1] === null ? [lo[0] + 1, 0, 0]
            : p[1] !== 0 || p[2] === null ? [0, lo[1] + 1, 0] : [0, 0, lo[2] + 1];
        return cmp(v, lo) >= 0 && cmp(v, hi) < 0;
    }
    case '~': {
        const hi = p[1] === null ? [lo[0] + 1, 0, 0] : [lo[0], lo[1] + 1, 0];
        return cmp(v, lo) >= 0 && cmp(v, hi) < 0;
    }
    default: return cmp(v, lo) >= 0 && cmp(v, upper(p)) < 0;
    }
}
export function satisfies(range, version) {
    const v = parse(version);
    return range.split('||').some((alt) => {
        alt = alt.trim();
        if (alt === '' || alt === '*' || alt === 'x') return true;
        const hy = /^(\S+)\s+-\s+(\S+)$/.exec(alt);
        if (hy) return comparator('>=' + hy[1], v) && comparator('<=' + hy[2], v);
        const parts = alt.replace(/(>=|<=|>|<|=|\^|~)\s+/g, '$1').split(/\s+/);
        return parts.every((c) => comparator(c, v));
    });
}

// PD_CHECK_NODE_VERSION stands in for the running version (to test this check).
const node = process.env.PD_CHECK_NODE_VERSION || process.versions.node;
let bad = 0;
for (const file of process.argv.slice(2)) {
    let lock;
    try {
        lock = JSON.parse(readFileSync(file, 'utf8'));
    } catch (e) {
        console.error(`check-node-engines: ${file}: ${e.message}`);
        process.exit(2);
    }
    for (const [path, pkg] of Object.entries(lock.packages || {})) {
        const want = pkg && pkg.engines && pkg.engines.node;
        if (typeof want !== 'string' || satisfies(want, node)) continue;
        const name = path === '' ? (lock.name || '(root)') : path.replace(/^.*node_modules\//, '');
        console.error(`check-node-engines: ${file}: ${name}@${pkg.version || '?'} wants Node.js "${want}", ` +
            `this machine has ${node} (${process.execPath})`);
        bad++;
    }
}
if (bad) {
    console.error(`check-node-engines: ${bad} package(s) will not run on Node.js ${node}: pin a version that ` +
        `accepts it in that package.json (see "npm view PKG@VERSION engines"), or install a newer Node.js`);
    process.exit(1);
}
