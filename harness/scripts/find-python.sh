#!/usr/bin/env bash
# Prints the path of a Python interpreter of the wanted major.minor version (default 3.13):
# python3.13 on PATH, then python3 if it is that version, then pyenv's versions (newest patch
# first), then the usual system locations. Exits 1 with what to install when there is none.
set -euo pipefail
want="${1:-3.13}"

is_wanted() {
  [ -x "$1" ] && [ "$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$want" ]
}

candidates=()
for name in "python$want" python3 python; do
  path="$(command -v "$name" 2>/dev/null || true)"
  [ -n "$path" ] && candidates+=("$path")
done
pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
if [ -d "$pyenv_root/versions" ]; then
  while IFS= read -r dir; do
    candidates+=("$dir/bin/python$want" "$dir/bin/python")
  done < <(find "$pyenv_root/versions" -maxdepth 1 -name "$want.*" | sort -t. -k3,3nr)
fi
candidates+=("/usr/local/bin/python$want" "/usr/bin/python$want" "/opt/homebrew/bin/python$want")

for candidate in "${candidates[@]}"; do
  if is_wanted "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done
{
  echo "no Python $want found (looked for python$want and python3 on PATH, and in $pyenv_root/versions)."
  echo "Install it, e.g.: pyenv install $want   (or apt-get install python$want / brew install python@$want),"
  echo "or name one: make PYTHON=/path/to/python$want ..."
} >&2
exit 1
