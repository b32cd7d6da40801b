#!/bin/sh
# model_names — `--model` as users name models: a shipped config by its
# name or its Hugging Face Hub id (data/models/hub.txt), either in any
# case, and any other id's config.json from a local Hugging Face cache laid
# out as huggingface_hub lays it out (models--ORG--NAME/refs/main naming
# snapshots/REV/), found through HF_HUB_CACHE, else HF_HOME/hub; an id
# found nowhere is one line naming the path looked at.
# Runs from the build directory; ZS_BUILDDIR overrides.
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$(cd "$top" && pwd)/zerosim
srcdir=${srcdir:-.}
if [ ! -x "$zerosim" ]; then
	echo "model_names: $zerosim is not built" >&2
	exit 99
fi
[ -d "$top/data/models" ] || { ZEROSIM_DATADIR=$srcdir; export ZEROSIM_DATADIR; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-names.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
failed=0
fail() {
	echo "model_names: FAIL: $*" >&2
	failed=1
}
# A cache that holds nothing unless a test makes it: no user's cache counts.
HF_HUB_CACHE=$tmp/empty HF_HOME=$tmp/nohome
export HF_HUB_CACHE HF_HOME
unset HUGGINGFACE_HUB_CACHE

# headline ARG: theory's first text line for --model ARG (its name and shape).
headline() {
	"$zerosim" theory --model "$1" --world 8 --format text 2>"$tmp/err" | head -n 1
}

echo "model_names: 1: every shipped config has one Hub id, and both names give it"
models=${ZEROSIM_DATADIR:-$top}/data/models
n=0
for f in "$models"/*.json; do
	name=$(basename "$f" .json)
	ids=$(awk -v n="$name" '$1 == n { print $2 }' "$models/hub.txt")
	[ "$(echo "$ids" | grep -c /)" -eq 1 ] || { fail "$name: not one Hub id in hub.txt: '$ids'"; continue; }
	want=$(headline "$name")
	case $want in
	"$name ("*) ;;
	*) fail "$name: $want $(cat "$tmp/err")"; continue ;;
	esac
	upper=$(echo "$ids" | tr a-z A-Z)
	lower=$(echo "$ids" | tr A-Z a-z)
	for a in "$ids" "$upper" "$lower" "$(echo "$name" | tr a-z A-Z)"; do
		got=$(headline "$a")
		[ "$got" = "$want" ] || fail "--model $a: '$got', expected '$want' $(cat "$tmp/err")"
	done
	n=$((n + 1))
done
[ "$n" -ge 11 ] || fail "only $n shipped configs"
# theory --help lists every shipped config (the review of s35-int: two were missing)
"$zerosim" theory --help | tr -s ' \n' ' ' >"$tmp/help"
for f in "$models"/*.json; do
	grep -qE "[ (]$(basename "$f" .json)[,;)]" "$tmp/help" || fail "theory --help does not list $(basename "$f" .json)"
done
# The name users know, not only the one the data folder spells.
case $(headline meta-llama/Meta-Llama-3-8B) in
"llama-3-8b (llama): 8,030,261,248 parameters"*) ;;
*) fail "meta-llama/Meta-Llama-3-8B: $(headline meta-llama/Meta-Llama-3-8B) $(cat "$tmp/err")" ;;
esac
[ "$(headline Llama-3-8B)" = "$(headline llama-3-8b)" ] || fail "Llama-3-8B is not llama-3-8b"

echo "model_names: 2: another id from the Hugging Face cache, the revision refs/main names"
mk_cache() { # CACHE ORG--NAME REV: a snapshot REV holding the tiny llama, and a stale one
	# as huggingface_hub writes them: the file in blobs/, the snapshot's
	# config.json a relative link to it, refs/main the commit without a newline
	r=$1/models--$2
	mkdir -p "$r/refs" "$r/blobs" "$r/snapshots/$3" "$r/snapshots/0000stale"
	printf '%s' "$3" >"$r/refs/main"
	cp "$srcdir/report/models/llama-tiny.json" "$r/blobs/a1b2c3"
	ln -s ../../blobs/a1b2c3 "$r/snapshots/$3/config.json"
	echo '{"model_type": "none such"}' >"$r/snapshots/0000stale/config.json"
}
mk_cache "$tmp/hubcache" Acme--Tiny-Llama 1a2b3c4d
HF_HUB_CACHE=$tmp/hubcache headline Acme/Tiny-Llama >"$tmp/h1"
grep -q '^Tiny-Llama (llama): ' "$tmp/h1" || fail "HF_HUB_CACHE: $(cat "$tmp/h1" "$tmp/err")"
HF_HUB_CACHE=$tmp/hubcache headline acme/tiny-llama >"$tmp/h2"
cmp -s "$tmp/h1" "$tmp/h2" || fail "the cached id in lower case: $(cat "$tmp/h2" "$tmp/err")"
# The same numbers as the file itself.
"$zerosim" theory --model "$srcdir/report/models/llama-tiny.json" --world 8 --format text 2>/dev/null |
	head -n 1 | sed 's/^llama-tiny/Tiny-Llama/' >"$tmp/h3"
cmp -s "$tmp/h1" "$tmp/h3" || fail "the cached config is not the file's: $(cat "$tmp/h1" "$tmp/h3")"
# refs/main as an editor leaves it, with a newline.
printf '1a2b3c4d\n' >"$tmp/hubcache/models--Acme--Tiny-Llama/refs/main"
HF_HUB_CACHE=$tmp/hubcache headline Acme/Tiny-Llama | grep -q '^Tiny-Llama (llama): ' ||
	fail "refs/main with a newline: $(cat "$tmp/err")"
# HF_HOME/hub when HF_HUB_CACHE is unset; HF_HUB_CACHE first when both are.
mk_cache "$tmp/home/hub" Acme--Home 5e6f
(unset HF_HUB_CACHE; HF_HOME=$tmp/home headline Acme/Home) | grep -q '^Home (llama): ' ||
	fail "HF_HOME/hub: $(cat "$tmp/err")"
HF_HUB_CACHE=$tmp/hubcache HF_HOME=$tmp/home headline Acme/Home >"$tmp/h4"
[ ! -s "$tmp/h4" ] && grep -q "$tmp/hubcache/models--Acme--Home/refs/main" "$tmp/err" ||
	fail "HF_HUB_CACHE does not come before HF_HOME: $(cat "$tmp/h4" "$tmp/err")"
# No output replaces the cached config (through its link, the blob).
HF_HUB_CACHE=$tmp/hubcache "$zerosim" theory --model Acme/Tiny-Llama --world 2 \
	--out "$tmp/hubcache/models--Acme--Tiny-Llama/snapshots/1a2b3c4d/config.json" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "is the --model file" "$tmp/err" || fail "--out over the cached config: $(cat "$tmp/err")"
cmp -s "$tmp/hubcache/models--Acme--Tiny-Llama/blobs/a1b2c3" "$srcdir/report/models/llama-tiny.json" ||
	fail "the cached config's blob changed"
# measure reads it too (and never writes over it).
HF_HUB_CACHE=$tmp/hubcache "$zerosim" measure --model Acme/Tiny-Llama --seq 8 --steps 1 --world 1 \
	--out "$tmp/m.json" 2>"$tmp/err" || fail "measure --model Acme/Tiny-Llama: $(cat "$tmp/err")"
grep -q "\"name\":[[:space:]]*\"Tiny-Llama\"" "$tmp/m.json" || fail "measured.json does not name Tiny-Llama"

echo "model_names: 3: an id found nowhere is one line naming where it looked"
expect_err() { # PATTERN ARG...
	p=$1
	shift
	"$zerosim" theory --world 8 "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "$*: exit $rc, expected 2"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "$p" "$tmp/err" || fail "$*: stderr: $(cat "$tmp/err")"
	[ ! -s "$tmp/out" ] || fail "$*: wrote to stdout"
}
expect_err "^zerosim theory: --model: 'nobody/nothing' is no shipped config's Hub id .* (no $tmp/empty/models--nobody--nothing/refs/main)\$" \
	--model nobody/nothing
(unset HF_HUB_CACHE; expect_err "(no $tmp/nohome/hub/models--nobody--nothing/refs/main)\$" --model nobody/nothing)
(unset HF_HUB_CACHE HF_HOME; XDG_CACHE_HOME=$tmp/xdg expect_err "(no $tmp/xdg/huggingface/hub/models--a--b/refs/main)\$" --model a/b)
(unset HF_HUB_CACHE HF_HOME XDG_CACHE_HOME; HOME=$tmp/h expect_err "(no $tmp/h/.cache/huggingface/hub/models--a--b/refs/main)\$" --model a/b)
# refs/main naming a snapshot that is not there.
printf 'feedbeef' >"$tmp/hubcache/models--Acme--Tiny-Llama/refs/main"
HF_HUB_CACHE=$tmp/hubcache expect_err "without its config.json (no $tmp/hubcache/models--Acme--Tiny-Llama/snapshots/feedbeef/config.json)\$" \
	--model Acme/Tiny-Llama
# A revision that would leave the cache folder is no revision.
printf '../../x' >"$tmp/hubcache/models--Acme--Tiny-Llama/refs/main"
HF_HUB_CACHE=$tmp/hubcache expect_err "refs/main does not hold a revision\$" --model Acme/Tiny-Llama
# A shipped name in the wrong spelling still lists the shipped ones.
expect_err "no shipped model 'llama-3-9b' (gemma-2-2b, gemma-2-9b, gemma-3-1b, gemma-3-4b, gpt2, " --model llama-3-9b
# An existing file of an id's shape is a file, as before.
mkdir -p "$tmp/Acme"
cp "$srcdir/report/models/gpt2-tiny.json" "$tmp/Acme/Tiny-Llama"
(cd "$tmp" && "$zerosim" theory --model Acme/Tiny-Llama --world 8 --format text 2>"$tmp/err" | head -n 1) |
	grep -q '^Tiny-Llama (gpt2): ' || fail "a file named like an id: $(cat "$tmp/err")"

[ "$failed" -eq 0 ] && echo "model_names: PASS"
exit "$failed"
