#!/bin/sh
# datafile — where `zerosim report` finds its template without --template
# (src/util/datafile.h): $ZEROSIM_DATADIR when set, else beside the binary,
# else the installed data folder; a clear one-line error when none has it.
# Everything happens in a temporary folder. Exit 0 pass, 1 fail, 99 error.
set -u
top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-datafile.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "datafile: FAIL: $*" >&2; exit 1; }

"$top/zerosim" measure -q --layers 4,8,4 --world 1,2 --out "$tmp/m.json" &&
	"$top/zerosim" theory --layers 4,8,4 --world 1,2 --out "$tmp/t.json" || exit 99
report() { "$zs" report --no-render --measured "$tmp/m.json" --theory "$tmp/t.json" --out "$1" >/dev/null 2>"$tmp/err"; }

# A binary with a template of its own beside it, as in the folder it was
# built in; a marker tells the copies apart.
mkdir -p "$tmp/bin/report" "$tmp/data/report" "$tmp/empty" || exit 99
cp "$top/zerosim" "$tmp/bin/zerosim" || exit 99
{ cat "$src/report/zerosim-report.tex"; echo "% beside the binary"; } >"$tmp/bin/report/zerosim-report.tex"
{ cat "$src/report/zerosim-report.tex"; echo "% ZEROSIM_DATADIR"; } >"$tmp/data/report/zerosim-report.tex"
zs=$tmp/bin/zerosim

echo "datafile: 1: the template beside the binary"
(unset ZEROSIM_DATADIR; report "$tmp/r1") || fail "exit $? without ZEROSIM_DATADIR: $(cat "$tmp/err")"
cmp -s "$tmp/r1/zerosim-report.tex" "$tmp/bin/report/zerosim-report.tex" ||
	fail "the report did not use the template beside the binary"

echo "datafile: 2: ZEROSIM_DATADIR comes first"
ZEROSIM_DATADIR=$tmp/data report "$tmp/r2" || fail "exit $? with ZEROSIM_DATADIR: $(cat "$tmp/err")"
cmp -s "$tmp/r2/zerosim-report.tex" "$tmp/data/report/zerosim-report.tex" ||
	fail "the report did not use ZEROSIM_DATADIR's template"

echo "datafile: 3: a ZEROSIM_DATADIR without the template is an error naming it"
ZEROSIM_DATADIR=$tmp/empty report "$tmp/r3"
st=$?
[ "$st" -eq 1 ] || fail "exit $st with an empty ZEROSIM_DATADIR, expected 1"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^zerosim report: report/zerosim-report.tex is not in ZEROSIM_DATADIR ($tmp/empty)\$" "$tmp/err" ||
	fail "unexpected message: $(cat "$tmp/err")"
[ ! -e "$tmp/r3" ] || fail "the failed report created its --out folder"

# The installed folder is the build's $(pkgdatadir) (ZS_PKGDATADIR, from
# make check): where `make install` put a template the report must use
# that one, byte for byte; where none is installed it must fail naming the
# places it looked. Either way the case checks what happened.
echo "datafile: 4: nothing beside the binary nor in ZEROSIM_DATADIR: the installed template, or an error naming the places"
pkgdata=${ZS_PKGDATADIR:-}
[ -n "$pkgdata" ] || { echo "datafile: ZS_PKGDATADIR is not set (run it from make check)" >&2; exit 99; }
installed=$pkgdata/report/zerosim-report.tex
rm "$tmp/bin/report/zerosim-report.tex"
(unset ZEROSIM_DATADIR; report "$tmp/r4")
st=$?
if [ -f "$installed" ]; then
	[ "$st" -eq 0 ] || fail "exit $st with $installed installed, expected 0: $(cat "$tmp/err")"
	cmp -s "$tmp/r4/zerosim-report.tex" "$installed" || fail "the report did not use the installed template $installed"
else
	[ "$st" -eq 1 ] || fail "exit $st with no template anywhere, expected 1"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] &&
		grep -qF "zerosim report: report/zerosim-report.tex is neither in $pkgdata nor beside the zerosim binary" "$tmp/err" ||
		fail "unexpected message: $(cat "$tmp/err")"
	[ ! -e "$tmp/r4" ] || fail "the failed report created its --out folder"
fi
echo "datafile: pass"
