#!/bin/bash
# Issue 34 item 2: `--web.listen-address=localhost:PORT` serves on every
# address `localhost` resolves to. A stock Debian 12 /etc/hosts maps
# localhost to 127.0.0.1 and ::1, and a client (Node 18's fetch, curl -6, a
# browser) may take either; this machine's /etc/hosts may differ, so the
# check runs in a private mount namespace with Debian's standard hosts file
# bind-mounted over /etc/hosts (root: unshare + mount) unless /etc/hosts
# already maps localhost to ::1. Also: an empty host
# (":PORT") serves 0.0.0.0 and ::, and "[::1]:PORT" only ::1.
# Skips (exit 77) without root, unshare or an IPv6 loopback.
set -u
PROFD=${PROFD_BIN:?PROFD_BIN not set}
if ! getent ahosts localhost | grep -q '^::1 '; then
    [ "$(id -u)" = 0 ] || { echo "SKIP: localhost is not ::1 here and changing that needs root (unshare --mount)"; exit 77; }
    command -v unshare >/dev/null || { echo "SKIP: no unshare"; exit 77; }
fi
[ -e /proc/net/if_inet6 ] && grep -q '^00000000000000000000000000000001' /proc/net/if_inet6 ||
    { echo "SKIP: no IPv6 loopback (::1)"; exit 77; }

# A stock Debian /etc/hosts (a test-debian12.sh root, a user's machine): run
# as is. Else Debian's hosts file over /etc/hosts in a private mount
# namespace (never --propagation unchanged: the bind mount would reach the
# host's /etc/hosts).
if [ "${1:-}" != "--inside" ] && ! getent ahosts localhost | grep -q '^::1 '; then
    exec unshare --mount --propagation private "$0" --inside
fi

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
cat >"$tmp/hosts" <<'HOSTS'
127.0.0.1	localhost
127.0.1.1	debian

# The following lines are desirable for IPv6 capable hosts
::1     localhost ip6-localhost ip6-loopback
ff02::1 ip6-allnodes
ff02::2 ip6-allrouters
HOSTS
if [ "${1:-}" = "--inside" ]; then
    mount --bind "$tmp/hosts" /etc/hosts || { echo "SKIP: cannot bind-mount /etc/hosts"; exit 77; }
fi
getent ahosts localhost | grep -q '::1' || { echo "FAIL: localhost does not resolve to ::1 in the namespace"; exit 1; }

fails=0
checks=0
check() { # what url want(0: answers, 1: refused) [curl flags]
    local what=$1 url=$2 want=$3
    shift 3
    local code
    checks=$((checks + 1))
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$@" "$url")
    if [ "$want" = 0 ] && [ "$code" != 200 ]; then
        echo "FAIL: $what: $url answered '$code', want 200"; fails=$((fails + 1))
    elif [ "$want" = 1 ] && [ "$code" = 200 ]; then
        echo "FAIL: $what: $url answered 200, want no answer"; fails=$((fails + 1))
    else
        echo "ok: $what ($url -> ${code})"
    fi
}

# starts profd on $1 (listen address); sets PORT from its log
start() {
    local addr=$1 n=$2
    "$PROFD" serve --storage.path="$tmp/store$n" --web.listen-address="$addr" >"$tmp/log$n" 2>&1 &
    pids+=($!)
    for _ in $(seq 600); do
        grep -q 'msg="profd ready"' "$tmp/log$n" && return 0
        kill -0 "${pids[-1]}" 2>/dev/null || break
        sleep 0.1
    done
    echo "FAIL: profd on $addr did not become ready:"; cat "$tmp/log$n"; exit 1
}
port_of() { sed -n 's/.*url=http[s]*:\/\/[^ ]*:\([0-9]*\)\/.*/\1/p' "$1" | head -1; }

# 1. localhost:0 -> one port on both families
start localhost:0 1
P=$(port_of "$tmp/log1")
[ -n "$P" ] || { echo "FAIL: no port in the log"; cat "$tmp/log1"; exit 1; }
check "localhost, IPv4" "http://127.0.0.1:$P/-/ready" 0
check "localhost, IPv6" "http://[::1]:$P/-/ready" 0
check "curl -6 localhost" "http://localhost:$P/-/ready" 0 -6
check "curl -4 localhost" "http://localhost:$P/-/ready" 0 -4
if command -v node >/dev/null; then
    # what Node 18 does: the resolver's first answer only (::1 first here)
    if node -e "
      const dns=require('dns'); dns.setDefaultResultOrder && dns.setDefaultResultOrder('verbatim');
      require('http').get({host:'localhost',port:$P,path:'/-/ready',family:6},r=>process.exit(r.statusCode===200?0:1)).on('error',e=>{console.error(e.message);process.exit(1)})"; then
        echo "ok: node http.get localhost (family 6)"
    else
        echo "FAIL: node http.get localhost over IPv6"; fails=$((fails + 1))
    fi
fi
# both families count against one connection cap and share one store:
# a push over IPv6 is seen over IPv4
prof=${PD_TESTDATA:?PD_TESTDATA not set}/pprof/go-demo-once/heap.pb.gz
[ -f "$prof" ] || { echo "FAIL: $prof missing"; exit 1; }
{
    code=$(curl -s -o /dev/null -w '%{http_code}' -6 --data-binary @"$prof" \
        "http://localhost:$P/ingest?name=dual&from=$(date +%s)&format=pprof&spyName=gospy")
    [ "$code" = 200 ] || { echo "FAIL: push over IPv6 answered $code"; fails=$((fails + 1)); }
    if curl -s -4 "http://localhost:$P/api/v1/series?match%5B%5D=%7Bservice_name%3D%22dual%22%7D&start=$(($(date +%s) - 3600))&end=$(($(date +%s) + 3600))" | grep -q dual; then
        echo "ok: pushed over ::1, listed over 127.0.0.1"
    else
        echo "FAIL: the series pushed over ::1 is not listed over 127.0.0.1"; fails=$((fails + 1))
    fi
}

# 2. [::1]:0 -> IPv6 only
start '[::1]:0' 2
P2=$(port_of "$tmp/log2")
check "[::1], IPv6" "http://[::1]:$P2/-/ready" 0
check "[::1] not on IPv4" "http://127.0.0.1:$P2/-/ready" 1

# 3. 127.0.0.1:0 -> IPv4 only
start '127.0.0.1:0' 3
P3=$(port_of "$tmp/log3")
check "127.0.0.1, IPv4" "http://127.0.0.1:$P3/-/ready" 0
check "127.0.0.1 not on IPv6" "http://[::1]:$P3/-/ready" 1

# 4. :0 (every interface) -> both families
start ':0' 4
P4=$(port_of "$tmp/log4")
check "':port', IPv4" "http://127.0.0.1:$P4/-/ready" 0
check "':port', IPv6" "http://[::1]:$P4/-/ready" 0

echo "$((checks - fails)) passed, $fails failed"
[ "$fails" = 0 ]
