#!/bin/sh
# Installs runwire's man pages (man/*.1, man/*.7) for `cargo install` users.
#
# Usage: scripts/install-man.sh [--prefix DIR] [--uninstall]
#
# By default into <cargo root>/share/man, beside the bin/ that `cargo install`
# fills ($CARGO_INSTALL_ROOT, else $CARGO_HOME, else ~/.cargo): man-db looks
# in ../share/man of every directory on PATH, so `man runs` works with no
# MANPATH once ~/.cargo/bin is on PATH. --prefix DIR installs into
# DIR/share/man instead (e.g. --prefix ~/.local, or /usr/local as root).
# --uninstall removes the pages it would install.
#
# Exit status: 0 success; 1 a page could not be installed or removed;
# 2 usage error.
set -eu

usage() {
  echo "usage: $0 [--prefix DIR] [--uninstall]" >&2
  exit 2
}

prefix=${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}
uninstall=0
while [ $# -gt 0 ]; do
  case $1 in
    --prefix)
      { [ $# -ge 2 ] && [ -n "$2" ]; } || usage
      prefix=$2
      shift 2
      ;;
    --uninstall)
      uninstall=1
      shift
      ;;
    -h | --help)
      sed -n '2,14s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *) usage ;;
  esac
done

src=$(cd "$(dirname "$0")/../man" && pwd)
mandir=$prefix/share/man
n=0
for page in "$src"/*.[17]; do
  [ -f "$page" ] || continue
  name=$(basename "$page")
  section=man${name##*.}
  if [ "$uninstall" = 1 ]; then
    if [ -e "$mandir/$section/$name" ]; then
      rm -f "$mandir/$section/$name" || { echo "install-man: $mandir/$section/$name: cannot remove" >&2; exit 1; }
      n=$((n + 1))
    fi
  else
    mkdir -p "$mandir/$section" || { echo "install-man: $mandir/$section: cannot create" >&2; exit 1; }
    # Not cp: the page gets its mode whatever the umask.
    install -m 0644 "$page" "$mandir/$section/$name" || { echo "install-man: $mandir/$section/$name: cannot write" >&2; exit 1; }
    n=$((n + 1))
  fi
done

if [ "$uninstall" = 1 ]; then
  echo "install-man: removed $n pages from $mandir"
  exit 0
fi
echo "install-man: installed $n pages into $mandir (try: man runs; man 7 runwire)"
# Say so when man would not look there (its bin/ not on PATH, say).
if command -v manpath >/dev/null 2>&1; then
  case ":$(manpath 2>/dev/null || true):" in
    *":$mandir:"*) ;;
    *) echo "install-man: $mandir is not on man's path; add it: export MANPATH=\"$mandir:\$(manpath)\"" ;;
  esac
fi
