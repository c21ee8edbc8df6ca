#!/usr/bin/env bash
# Puts the RustSec advisory snapshot from ../shared where cargo-deny looks for its
# default database, so `cargo deny --offline check advisories` works without a network.
set -euo pipefail
snapshot="$(cd "$(dirname "$0")/../.." && pwd)/shared/rustsec-advisory-db"
db="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs/advisory-db-3157b0e258782691"
if [ ! -d "$snapshot" ]; then
  echo "no advisory snapshot at $snapshot" >&2
  exit 1
fi
date="$(grep -o '[0-9]\{4\}-[0-9]\{2\}-[0-9]\{2\}' "$snapshot/SNAPSHOT" | head -1)"
if [ ! -d "$db/.git" ]; then
  rm -rf "$db"
  mkdir -p "$db"
  cp -r "$snapshot/." "$db/"
  chmod -R u+w "$db"
  (
    cd "$db"
    git init -q
    git add -A
    GIT_AUTHOR_DATE="${date}T00:00:00Z" GIT_COMMITTER_DATE="${date}T00:00:00Z" \
      git -c user.name=advisory-snapshot -c user.email=advisory-snapshot@localhost commit -qm "RustSec snapshot $date"
  )
fi
echo "advisory database: snapshot of $date"
