#!/bin/sh
# Issue 12's real programs under `--alloc-hooks uprobe` and `preload`, heap counts per type
# (manifest events.by_type) side by side: scripts/modes-check-real.sh [BUILD] [NAME...]
# (default: every row). Each row is scripts/modes-check.sh; known differences are in the
# README ("Known differences from uprobe mode"). Needs root; the programs are Debian's
# (scripts/deps.sh installs them). Exit status: the number of rows that differ.
set -u
BUILD=build
[ -d "${1:-}" ] && { BUILD=$1; shift; }
here=$(dirname "$0")
lib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
work=$(mktemp -d /tmp/memtrack-modes-real.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
head -c 8000000 /usr/bin/perl /usr/lib/*/libc.so.6 /usr/bin/gcc 2>/dev/null >"$work/blob" || true
printf '#include <iostream>\n#include <vector>\nint main(){std::vector<int> v(10);std::cout<<v.size()<<"\\n";}\n' \
	>"$work/hello.cc"
sqlsql="create table t(a,b); with recursive c(x) as (select 1 union all select x+1 from c where x<20000) insert into t select x, hex(randomblob(20)) from c; create index i on t(b); select count(*) from t;"
rport=6391
redis="redis-server --port $rport --save '' --appendonly no --daemonize no >/dev/null & \
for i in 1 2 3 4 5 6 7 8 9 10; do redis-cli -p $rport ping >/dev/null 2>&1 && break; sleep 0.2; done; \
redis-cli -p $rport set k v >/dev/null; redis-cli -p $rport get k >/dev/null; \
redis-cli -p $rport rpush l a b c >/dev/null; redis-cli -p $rport lrange l 0 -1 >/dev/null; \
redis-cli -p $rport shutdown nosave >/dev/null; wait"
bad=0
row() {
	name=$1
	shift
	if [ -n "$only" ] && ! echo " $only " | grep -q " $name "; then
		return 0
	fi
	"$here/modes-check.sh" -n "$name" "$BUILD" -- "$@" >"$work/row" || bad=$((bad + 1))
	cat "$work/row"
}
only="$*"
row python3 /usr/bin/python3 -c "x=[bytes(100) for _ in range(20000)]; import json; json.dumps(list(range(1000)))"
row sqlite3 /usr/bin/sqlite3 "$work/db" "$sqlsql"
row perl /usr/bin/perl -e 'my %h; $h{$_} = "x" x ($_ % 50) for 1..20000; print scalar(keys %h), "\n"'
export MODES_CHECK_ENV="LD_PRELOAD=$lib/libmimalloc.so.2"
row perl+mimalloc /usr/bin/perl -e 'my %h; $h{$_} = "x" x ($_ % 50) for 1..20000; print scalar(keys %h), "\n"'
MODES_CHECK_ENV="LD_PRELOAD=$lib/libtcmalloc.so.4"
row python3+tcmalloc /usr/bin/python3 -c "x=[bytes(100) for _ in range(20000)]"
MODES_CHECK_ENV=
row git-log /usr/bin/git -C "$here/.." log -n 200 --stat --format=%s
row zstd-T2 /usr/bin/zstd -q -T2 -5 -f "$work/blob" -o "$work/blob.zst"
row g++ /usr/bin/g++ -O1 -o "$work/hello" "$work/hello.cc"
[ -x /usr/bin/node ] && row node /usr/bin/node -e "let a=[];for(let i=0;i<20000;i++)a.push({i,s:'x'+i});console.log(a.length)"
[ -x /usr/bin/redis-server ] && row redis-server /bin/sh -c "$redis"
echo "rows that differ: $bad"
exit $bad
