#!/usr/bin/env bash
# redhold's compat suite against the real Java Redisson client.
#
# Builds the Java driver (compat/redisson, Maven; the first build downloads
# Redisson into ~/.m2) and the Rust runner (compat/runner), then runs every
# check on a throwaway redis-server and a 3-master cluster. Prints one line
# per check and "N passed, N failed" last; exits non-zero on any failure.
#
# Needs: java 17+, mvn, cargo, redis-server and redis-cli (7+ for the
# cluster's sharded pub/sub) on PATH. Arguments go to the runner:
#   --only TEXT     run only the checks whose line contains TEXT
#   --no-cluster    skip the cluster
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
jar="$driver_dir/target/redhold-compat-driver.jar"
# Maven costs a JVM start even with nothing to do: rebuild only when the
# driver or its pom changed since the last build.
if [ ! -f "$jar" ] || [ -n "$(find "$driver_dir/pom.xml" "$driver_dir/src" -newer "$jar" -type f)" ]; then
    echo "== building the Redisson driver (Maven)"
    # (Debian's Maven 3.8 writes colour resets even with -B -q: strip them.)
    mvn -B -q -f "$driver_dir/pom.xml" -DskipTests package 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
fi

echo "== building the runner (cargo)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
cargo build --quiet --manifest-path compat/runner/Cargo.toml --target-dir "$target_dir"

echo "== running the compat suite"
exec "$target_dir/debug/redhold-compat" --jar "$jar" "$@"
