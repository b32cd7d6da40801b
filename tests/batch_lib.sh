# batch_lib.sh — sourced by the tests that run PyTorch references in
# batches (tests/ft_lib.sh's, hf_torch.sh); needs tmp, src, py
# (tests/torch_python.sh) and, under mode torch26, root and in.
# POSIX sh, as the tests.
# shellcheck disable=SC2154
# The batch: many cases' references in one python run (tests/batch_torch.py:
# torch and the reference imported once, each case in a child forked after
# the imports; ~1.5 s of CPU saved a case), cached as one by
# tests/torch_cache.py (the batch folder keyed by its files' bytes).
# ft_add B ARGS...: appends a case of tests/ft_torch.py (hf_torch.py: $B
# hf) to the batch $tmp/B, ARGS' paths relative to $tmp/B (ft_configs'
# files are there, and ft_in copies one in); its number in $n, its JSON
# to be at $tmp/B/$n.json (--out $n.json appended unless ARGS hold --out).
# ft_run B SCRIPT [PY]: runs the batch under this run's PyTorch (1.13 here,
# by $py or PY; under mode torch26, 2.6 in the root $root, the folder
# copied into $root$in and back), each case at most 600 s. ft_got B N: case N's exit status (its stdout and
# stderr $tmp/B/N.out, N.err); not run: 99.
ft_add() {
	b=$tmp/$1 l=
	shift
	mkdir -p "$b" || exit 99
	o=
	for x in "$@"; do
		[ "$x" = --out ] && o=1
		x=$(printf '%s' "$x" | sed 's/\\/\\\\/g; s/"/\\"/g')
		l="$l${l:+, }\"$x\""
	done
	n=1
	[ -f "$b/cases" ] && n=$(($(wc -l <"$b/cases") + 1))
	[ -z "$o" ] && l="$l, \"--out\", \"$n.json\""
	printf '[%s]\n' "$l" >>"$b/cases"
}
# ft_in B FILE NAME: FILE copied into the batch $tmp/B as NAME
ft_in() {
	mkdir -p "$tmp/$1" && cp "$2" "$tmp/$1/$3" || exit 99
}
# ft_rel B WORDS: WORDS (split at blanks) with each $tmp/PATH copied into
# the batch $tmp/B as PATH's slashes made _ and named so: the words a case
# of B takes (a path in a batch is relative to it)
ft_rel() {
	b=$1 r=
	shift
	set -f
	# shellcheck disable=SC2048
	for x in $*; do
		case $x in
		"$tmp"/*)
			f=$(echo "${x#"$tmp"/}" | tr / _)
			ft_in "$b" "$x" "$f"
			x=$f
			;;
		esac
		r="$r${r:+ }$x"
	done
	set +f
	echo "$r"
}
# ft_casedir B DIR: the case zerosim measure --write-case wrote as
# DIR/case.json, with its side files beside it (case.f32, under LoRA
# case.lora.f32: docs/formats.md, named from the case's), copied into the
# batch $tmp/B as a folder of DIR's name; a case of B names it
# NAME/case.json
ft_casedir() {
	mkdir -p "$tmp/$1/${2##*/}" && cp "$2"/case.* "$tmp/$1/${2##*/}/" || exit 99
}
ft_run() {
	[ -s "$tmp/$1/cases" ] || return 0
	if [ "${mode:-}" != torch26 ]; then
		# shellcheck disable=SC2086
		OPENBLAS_NUM_THREADS=1 ${3:-"$py"} "$src/tests/batch_torch.py" "$src/tests/$2" "$tmp/$1" >"$tmp/$1.log" 2>&1
		return 0
	fi
	rm -rf "${root:?}$in/$1" && mkdir -p "$root$in" && cp "$src/tests/batch_torch.py" "$src/tests/ft_torch.py" \
		"$src/tests/hf_torch.py" "$src/tests/fsdp_torch.py" "$root$in/" && cp -r "$tmp/$1" "$root$in/$1" || exit 99
	unshare -m sh -c "mount -t proc proc $root/proc && chroot $root env USE_LIBUV=0 PYTHONDONTWRITEBYTECODE=1 \
OPENBLAS_NUM_THREADS=1 python3 $in/batch_torch.py $in/$2 $in/$1" >"$tmp/$1.log" 2>&1
	cp -r "$root$in/$1/." "$tmp/$1/" || exit 99
}
ft_got() {
	cat "$tmp/$1/$2.rc" 2>/dev/null || echo 99
}
