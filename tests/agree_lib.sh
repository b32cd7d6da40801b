# agree_lib.sh — sourced by the tests that hold zerosim's theory to its
# measure with tests/json_agree (theory_vs_measure.sh, ds_defaults.sh),
# $name (the test's) and $tag (its temporary folder's) set first: sets top
# (the build directory; ZS_BUILDDIR overrides), zerosim, agree and tmp (a
# folder of the test's own, removed on exit); exit 99 (a hard error) where
# zerosim or json_agree is not built.
top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
agree=$top/tests/json_agree
for prog in "$zerosim" "$agree"; do
	if [ ! -x "$prog" ]; then
		echo "$name: $prog is not built" >&2
		exit 99
	fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-$tag.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
