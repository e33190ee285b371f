# Sourced (POSIX sh) by ./mvnw, ./kvrouter and .ci/run: points JAVA_HOME at a JDK >= 21.
# Order: $JAVA_HOME if it is a JDK >= 21; else the newest JDK >= 21 installed beside the
# default java (its parent folder, usually /usr/lib/jvm) or under /usr/lib/jvm.
# Leaves JAVA_HOME exported and returns 0, or prints what to do and returns 1.

kvrouter_jdk_major() {
  # prints the feature version of the JDK at $1 (0 when it is not a usable JDK)
  if [ ! -x "$1/bin/java" ] || [ ! -x "$1/bin/javac" ]; then echo 0; return; fi
  if [ -r "$1/release" ]; then
    v=$(sed -n 's/^JAVA_VERSION="\([0-9][0-9]*\).*/\1/p' "$1/release")
  else
    v=$("$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n 1)
  fi
  case "$v" in ''|*[!0-9]*) echo 0 ;; 1) echo 1 ;; *) echo "$v" ;; esac
}

kvrouter_find_jdk() {
  if [ -n "${JAVA_HOME-}" ] && [ "$(kvrouter_jdk_major "$JAVA_HOME")" -ge 21 ]; then
    export JAVA_HOME
    return 0
  fi
  dirs="/usr/lib/jvm"
  default_java=$(command -v java 2>/dev/null || true)
  if [ -n "$default_java" ]; then
    default_home=$(dirname "$(dirname "$(readlink -f "$default_java")")")
    [ "$(dirname "$default_home")" = /usr/lib/jvm ] || dirs="$(dirname "$default_home") $dirs"
  fi
  best="" best_major=0
  case $- in *f*) kvrouter_noglob=1; set +f ;; *) kvrouter_noglob=0 ;; esac
  for d in $dirs; do
    [ -d "$d" ] || continue
    for candidate in "$d"/*; do
      [ -d "$candidate" ] || continue
      m=$(kvrouter_jdk_major "$candidate")
      if [ "$m" -gt "$best_major" ]; then best="$candidate" best_major="$m"; fi
    done
  done
  [ "$kvrouter_noglob" = 1 ] && set -f
  if [ "$best_major" -ge 21 ]; then
    JAVA_HOME="$best"
    export JAVA_HOME
    return 0
  fi
  echo "kvrouter needs a JDK 21 or newer, and none was found." >&2
  echo "  JAVA_HOME=${JAVA_HOME-<unset>} is not one, and none lies in: $dirs" >&2
  echo "  Install one (e.g. apt-get install openjdk-21-jdk-headless, or a Temurin 21+ JDK)" >&2
  echo "  and point JAVA_HOME at it: export JAVA_HOME=/path/to/jdk" >&2
  return 1
}
