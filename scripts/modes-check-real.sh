#!/bin/sh
# Issue 12's real programs under `--alloc-hooks uprobe` and `preload`, heap counts per type
# (manifest events.by_type) side by side: scripts/modes-check-real.sh [BUILD] [NAME...]
# (default: every row). Each row is scripts/modes-check.sh; known differences are in the
# README ("Known differences from uprobe mode"). Needs root; the programs are Debian's
# (scripts/deps.sh installs them, but for node and redis-server: their rows say when they are
# missing). Exit status: the number of rows that differ.
set -u
BUILD=build
[ -d "${1:-}" ] && { BUILD=$1; shift; }
here=$(dirname "$0")
lib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
work=$(mktemp -d /tmp/memtrack-modes-real.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
head -c 8000000 /usr/bin/perl /usr/lib/*/libc.so.6 /usr/bin/gcc 2>/dev/null >"$work/blob" || true
# binutils' ar loads the LLVM gold plugin (llvm's bfd-plugins), a C++ library, with
# dlopen(RTLD_LOCAL) into a C program: libstdc++ outside the global scope (it aborted under the
# interposer until the interposer looked for operator new there too)
printf 'int f(void) { return 1; }\n' >"$work/f.c"
gcc -c -o "$work/f.o" "$work/f.c"
printf '#include <iostream>\n#include <vector>\nint main(){std::vector<int> v(10);std::cout<<v.size()<<"\\n";}\n' \
	>"$work/hello.cc"
sqlsql="create table t(a,b); with recursive c(x) as (select 1 union all select x+1 from c where x<20000) insert into t select x, hex(randomblob(20)) from c; create index i on t(b); select count(*) from t;"
# redis-server (Debian's links the shared libjemalloc) on a unix socket; the shell waits for its
# "... accept connections ..." log line on a fifo (a polling loop would allocate as often as
# it turns) and keeps reading the log until it exits
rsock=$work/redis.sock
mkfifo "$work/redis.log"
redis="redis-server --port 0 --unixsocket $rsock --save '' --appendonly no --hz 1 \
--logfile '' >$work/redis.log & exec 3<$work/redis.log; \
while read -r l <&3; do case \$l in *'accept connections'*) break;; esac; done; \
redis-cli -s $rsock set k v >/dev/null; redis-cli -s $rsock get k >/dev/null; \
redis-cli -s $rsock rpush l a b c >/dev/null; redis-cli -s $rsock lrange l 0 -1 >/dev/null; \
redis-cli -s $rsock shutdown nosave >/dev/null; cat <&3 >/dev/null; wait"
bad=0
row() {
	name=$1
	shift
	if [ -n "$only" ] && ! echo " $only " | grep -q " $name "; then
		return 0
	fi
	# fixed hash seeds, no ASLR (setarch -R: gcc's and perl's hash tables grow with the
	# addresses and seeds): what is left to differ between two runs is timing (node)
	MODES_CHECK_ENV="PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 PYTHONHASHSEED=0 ${pre_lib:-}" \
		"$here/modes-check.sh" -n "$name" "$BUILD" -- setarch "$(uname -m)" -R "$@" \
		>"$work/row" || bad=$((bad + 1))
	cat "$work/row"
}
only="$*"
row python3 /usr/bin/python3 -c "x=[bytes(100) for _ in range(20000)]; import json; json.dumps(list(range(1000)))"
row sqlite3 /usr/bin/sqlite3 :memory: "$sqlsql"
row perl /usr/bin/perl -e 'my %h; $h{$_} = "x" x ($_ % 50) for 1..20000; print scalar(keys %h), "\n"'
pre_lib="LD_PRELOAD=$lib/libmimalloc.so.2"
row perl+mimalloc /usr/bin/perl -e 'my %h; $h{$_} = "x" x ($_ % 50) for 1..20000; print scalar(keys %h), "\n"'
pre_lib="LD_PRELOAD=$lib/libtcmalloc.so.4"
row python3+tcmalloc /usr/bin/python3 -c "x=[bytes(100) for _ in range(20000)]"
pre_lib=
row git-log /usr/bin/git -C "$here/.." log -n 200 --stat --format=%s
row zstd-T2 /usr/bin/zstd -q -T2 -5 -f "$work/blob" -o "$work/blob.zst"
row g++ /usr/bin/g++ -O1 -o "$work/hello" "$work/hello.cc"
row ar-plugin /bin/sh -c "rm -f '$work/f.a'; exec /usr/bin/ar rcs '$work/f.a' '$work/f.o'"
# optional programs (not in scripts/deps.sh: a server and a large runtime): said, not skipped
# silently
if [ -x /usr/bin/node ]; then
	row node /usr/bin/node -e "let a=[];for(let i=0;i<20000;i++)a.push({i,s:'x'+i});console.log(a.length)"
else
	echo "node                   skipped: /usr/bin/node missing (apt-get install nodejs)"
fi
if [ -x /usr/bin/redis-server ]; then
	row redis-server /bin/sh -c "$redis"
else
	echo "redis-server           skipped: /usr/bin/redis-server missing (apt-get install redis-server)"
fi
echo "rows that differ: $bad"
exit $bad
