#!/bin/sh
# No include cycle among the modules of src/engine, src/theory, src/util,
# src/report and src/cli: module X (X.c and X.h) depends on Y when either
# includes Y.h; a cycle means no module of it can be read, tested or
# replaced without the others (the engine's was engine -> scheme -> model
# -> tfm -> engine, broken by engine/rng.h; util's config -> schedule ->
# config; the report's data -> host -> figures -> tfm -> figures). Prints
# each cycle found, as a path of modules.
srcdir=${srcdir:-.}
cd "$srcdir/src" || exit 99
for f in engine/*.[ch] theory/*.[ch] util/*.[ch] report/*.[ch] cli/*.[ch]; do
	m=${f%.?}
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$f" | while read -r d; do
		[ "$d" != "$m" ] && [ -e "$d.h" ] && echo "$m $d"
	done
done | sort -u | awk '
	{ n[$1]++; to[$1, n[$1]] = $2; mods[$1]; mods[$2] }
	function visit(v, path,    i, w) {
		state[v] = 1
		for (i = 1; i <= n[v]; i++) {
			w = to[v, i]
			if (state[w] == 1) { print "cycle: " path " -> " w; bad = 1 }
			else if (state[w] == 0) visit(w, path " -> " w)
		}
		state[v] = 2
	}
	END {
		for (v in mods) if (state[v] == 0) visit(v, v)
		if (bad) exit 1
		print "no include cycle among the modules of src/engine, src/theory, src/util, src/report and src/cli"
	}'
