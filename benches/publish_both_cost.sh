#!/usr/bin/env bash
# Server-side cost of publishing both ways (docs/wire-format.md, "Redisson
# versions"): a release-shaped script (HSET, DEL, publish) run N times by one
# redis-benchmark client, with and without the prelude of src/scripts.rs on
# one server, then with `spublish` and `publish+spublish` on a throwaway
# three-master cluster. Prints the owner's usec_per_call (INFO commandstats)
# and the other masters' CPU per release (INFO cpu). Needs redis-server,
# redis-cli and redis-benchmark 7+ on PATH. Usage: N=50000 benches/publish_both_cost.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
N=${N:-50000}
dir="$(mktemp -d)"
ports=()
cleanup() {
    for p in "${ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
# The prelude, as src/scripts.rs builds it (a Rust string with line continuations).
prelude="$(sed -n '/^const PRELUDE: &str = "/,/";$/p' "$root/src/scripts.rs" \
    | sed 's/^const PRELUDE: &str = "//; s/";$//; s/\\$//' | tr -d '\n')"
body="redis.call('hset', KEYS[1], 'f', 1) redis.call('del', KEYS[1]) return redis.call(ARGV[1], KEYS[2], '0')"
port() { python3 -c 'import random; print(random.randint(20000, 50000))'; }
start() { # port [extra args]
    local p=$1; shift
    redis-server --port "$p" --save "" --appendonly no --daemonize yes --dir "$dir" \
        --logfile "$dir/$p.log" "$@"
    ports+=("$p")
    until redis-cli -p "$p" ping >/dev/null 2>&1; do sleep 0.1; done
}
per_call() { redis-cli -p "$1" info commandstats | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p'; }
cpu() { redis-cli -p "$1" info cpu | awk -F: '/used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'; }
run() { # port sha publish-command
    redis-cli -p "$1" config resetstat >/dev/null
    redis-benchmark -p "$1" -n "$N" -c 1 -q EVALSHA "$2" 2 'lk{a}' 'ch{a}' "$3" >/dev/null
}

single=$(port); start "$single"
without=$(redis-cli -p "$single" script load "$body")
behind=$(redis-cli -p "$single" script load "$prelude$body")
for round in 1 2 3; do
    for which in without behind; do
        run "$single" "${!which}" publish
        echo "single server, $which the prelude, round $round: $(per_call "$single") us per release"
    done
done

nodes=()
for _ in 1 2 3; do
    p=$(port); nodes+=("$p")
    start "$p" --cluster-enabled yes --cluster-config-file "$dir/nodes-$p.conf"
done
echo yes | redis-cli --cluster create "${nodes[@]/#/127.0.0.1:}" --cluster-replicas 0 >/dev/null
for p in "${nodes[@]}"; do
    until redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok'; do sleep 0.2; done
done
slot=$(redis-cli -p "${nodes[0]}" cluster keyslot 'lk{a}')
owner=""
for p in "${nodes[@]}"; do
    for range in $(redis-cli -p "$p" cluster nodes | grep myself | cut -d' ' -f9-); do
        if [ "$slot" -ge "${range%-*}" ] && [ "$slot" -le "${range#*-}" ]; then owner=$p; fi
    done
done
sha=$(redis-cli -p "$owner" script load "$prelude$body")
for round in 1 2 3; do
    for command in spublish publish+spublish; do
        before=(); for p in "${nodes[@]}"; do before+=("$(cpu "$p")"); done
        run "$owner" "$sha" "$command"
        others=0
        for i in 0 1 2; do
            [ "${nodes[$i]}" = "$owner" ] && continue
            others=$(python3 -c "print($others + $(cpu "${nodes[$i]}") - ${before[$i]})")
        done
        echo "cluster, $command, round $round: owner $(per_call "$owner") us per release;" \
            "the other two masters $(python3 -c "print(round($others / $N * 1e6, 2))") us of CPU per release"
    done
done
