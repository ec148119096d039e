#!/usr/bin/env bash
# Build (once, cached) and run the Atlas notification reader: each line of
# FILE is one message of the change feed's atlas format, deserialised with
# Apache Atlas's own classes from Maven Central.
#   testbed/clients/atlas_reader.sh FILE
#   testbed/clients/atlas_reader.sh --build   (resolve and build only)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${HMSPROXY_CACHE:-$HOME/.cache/hmsproxy-testbed}
proj="$HERE/atlasreader"
jar="$proj/target/atlasreader-1.jar"
cpf="$proj/target/classpath"
src_newer=$(find "$proj/src" "$proj/pom.xml" -newer "$cpf" 2>/dev/null | head -1 || true)
if [[ ! -f "$jar" || ! -f "$cpf" || -n "$src_newer" ]]; then
  echo "[atlas_reader] building (Atlas jars from Maven Central)" >&2
  out=$(cd "$proj" && mvn -q -B -Dstyle.color=never "-Dmaven.repo.local=$CACHE/m2" package \
      dependency:build-classpath -DincludeScope=runtime "-Dmdep.outputFile=$cpf" 2>&1) \
    || { printf '%s\n' "$out" >&2; exit 1; }
fi
if [[ ${1:-} == --build ]]; then exit 0; fi
file=${1:?usage: atlas_reader.sh FILE}
exec java -Xmx256m -cp "$jar:$(cat "$cpf")" io.hmsproxy.testbed.AtlasReader "$file"
