#!/usr/bin/env bash
# redhold's compat suite against the real Java Redisson client.
#
# Builds the Java driver (compat/redisson, Maven; the first build downloads
# Redisson into ~/.m2) and the Rust runner (compat/runner), then runs every
# check on a throwaway redis-server, a 3-master cluster and a master behind a
# sentinel. Prints one line per check and "N passed, N failed, N not in
# Redisson V" last; exits non-zero on any failure.
#
# Needs: java 17+, mvn, cargo, redis-server and redis-cli (7+ for the
# cluster's sharded pub/sub) on PATH. Arguments:
#   --redisson V    the Redisson release to run against (or REDISSON_VERSION=V;
#                   default: the one pom.xml pins, the newest). Each release
#                   builds into compat/redisson/target/redisson-V/ once.
#   --only TEXT     run only the checks whose line contains TEXT
#   --no-cluster    skip the cluster
#   --no-sentinel   skip the master behind a sentinel
# The other arguments go to the runner. docs/wire-format.md has the table of
# the releases this runs on and what each needs.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

missing=()
for tool in java mvn cargo redis-server redis-cli; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "error: compat/redisson/run.sh needs ${missing[*]} on PATH" >&2
    exit 2
fi

driver_dir=compat/redisson
pinned="$(sed -n 's:.*<redisson.version>\(.*\)</redisson.version>.*:\1:p' "$driver_dir/pom.xml")"
version="${REDISSON_VERSION:-$pinned}"
runner_args=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        --redisson)
            [ "$#" -ge 2 ] || { echo "error: --redisson needs a version" >&2; exit 2; }
            version="$2"
            shift 2
            ;;
        *)
            runner_args+=("$1")
            shift
            ;;
    esac
done
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "error: a Redisson version looks like 3.17.7, not '$version'" >&2
    exit 2
fi
jar="$driver_dir/target/redisson-$version/redhold-compat-driver.jar"
# Maven costs a JVM start even with nothing to do: rebuild only when the
# driver or its pom changed since the last build.
if [ ! -f "$jar" ] || [ -n "$(find "$driver_dir/pom.xml" "$driver_dir/src" -newer "$jar" -type f)" ]; then
    echo "== building the Redisson $version driver (Maven)"
    # (Debian's Maven 3.8 writes colour resets even with -B -q: strip them.)
    mvn -B -q -f "$driver_dir/pom.xml" -Dredisson.version="$version" -DskipTests package 2>&1 \
        | sed 's/\x1b\[[0-9;]*m//g'
fi

echo "== building the runner (cargo)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
cargo build --quiet --manifest-path compat/runner/Cargo.toml --target-dir "$target_dir"

echo "== running the compat suite against Redisson $version"
exec "$target_dir/debug/redhold-compat" --jar "$jar" --redisson-version "$version" \
    ${runner_args[@]+"${runner_args[@]}"}
