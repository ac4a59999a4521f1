#!/usr/bin/env bash
# The code sandbox's OS boundary needs bubblewrap (bwrap). Install Debian's package when missing and
# running as root with apt-get; otherwise say how to install it.
#   scripts/ensure-bubblewrap.sh             warn when it cannot be installed (make run)
#   scripts/ensure-bubblewrap.sh --required  fail when it cannot be installed (make test)
set -euo pipefail
command -v bwrap >/dev/null 2>&1 && exit 0
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  command -v bwrap >/dev/null && { echo "ensure-bubblewrap: installed $(bwrap --version)"; exit 0; }
fi
echo "ensure-bubblewrap: bubblewrap (bwrap) is missing: tasks that run model-written code (humaneval)" \
     "will refuse to run. Install it: sudo apt-get install bubblewrap (Fedora: sudo dnf install bubblewrap)" >&2
[[ "${1:-}" == "--required" ]] && exit 1
exit 0
