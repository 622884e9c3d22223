#!/bin/sh
# ./make.sh [TARGET...]: `make TARGET...` on a Debian machine that may not have make yet (a
# minimal Debian 12, debootstrap --variant=minbase, has none): scripts/deps.sh installs it first
# (as root), with the other packages the targets need.
set -eu
cd "$(dirname "$0")"
command -v make >/dev/null 2>&1 || scripts/deps.sh
exec make "$@"
