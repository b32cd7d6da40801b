# moe_lib — sourced by tests/moe_step.sh, moe_theory.sh, moe_fw.sh, ds_moe.sh, qwen_moe.sh and qwen3_moe.sh (after
# `name=...` and `needs="BINARY..."`): the build's zerosim and the binaries
# named, python3 (77 without it), a temporary folder $tmp removed at exit,
# and in it config.json, the tiny mixtral both test (d 64, F 96, 2 blocks,
# 4 experts, top 2, vocabulary 64, 32 positions), or $ZS_MOE_CONFIG's.
set -u
top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
for b in "$zerosim" $needs; do
	[ -x "$b" ] || { echo "$name: $b is not built" >&2; exit 99; }
done
command -v python3 >/dev/null 2>&1 || { echo "SKIP: $name: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-$name.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
# ZS_MOE_CONFIG: another mixture's config.json instead (tests/qwen_moe.sh's)
if [ -n "${ZS_MOE_CONFIG:-}" ]; then
	cp "$ZS_MOE_CONFIG" "$tmp/config.json" || exit 99
else
	cat >"$tmp/config.json" <<'JSON'
{"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
 "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 64, "max_position_embeddings": 32,
 "num_local_experts": 4, "num_experts_per_tok": 2, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0}
JSON
fi
# a test's verdict: fail says why and makes it 1
status=0
fail() { echo "$name: FAIL: $*" >&2; status=1; }
# sweep_agree TAG SWEEP: measure SWEEP into $tmp/m-TAG.json, then the
# theory under --routing FILE (that file) must agree with it to the byte
# and --routing balanced must depart (tests/json_agree exits 1); a line
# each, fail (the caller's) on either, exit 99 where a command fails.
sweep_agree() {
	# shellcheck disable=SC2086
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q $2 --out "$tmp/m-$1.json" ||
		{ echo "$name: measure $1 failed" >&2; exit 99; }
	for r in file balanced; do
		arg=$r
		[ "$r" = file ] && arg=$tmp/m-$1.json
		# shellcheck disable=SC2086
		"$zerosim" theory $2 --routing "$arg" --out "$tmp/$r-$1.json" ||
			{ echo "$name: theory $1 --routing $r failed" >&2; exit 99; }
		"$top/tests/json_agree" "$tmp/m-$1.json" "$tmp/$r-$1.json" >"$tmp/out" 2>&1
		case $r:$? in
		file:0 | balanced:1) echo "ok: $1 --routing $r against measure: $(head -1 "$tmp/out")" ;;
		*) fail "$1 --routing $r against measure: $(cat "$tmp/out")" ;;
		esac
	done
}
# routing_refused SED-CHANGE KEY: the theory of $tmp/config.json changed by
# SED-CHANGE under the routing of sweep_agree's mixed-full sweep
# ($tmp/m-mixed-full.json) is refused naming config.model.KEY (the routing
# follows the config); a line, or fail (the caller's).
routing_refused() {
	sed "$1" "$tmp/config.json" >"$tmp/other.json"
	"$zerosim" theory --model "$tmp/other.json" --seq 16 --batch 4 --precision mixed --recompute full --world 1,2,3 \
		--unit model,layer --steps 3 --routing "$tmp/m-mixed-full.json" --out "$tmp/x.json" 2>"$tmp/err"
	st=$?
	if [ $st = 2 ] && grep -q "config.model.$2" "$tmp/err"; then
		echo "ok: refused: $(cat "$tmp/err")"
	else
		fail "another config's routing ($1): exit $st, $(cat "$tmp/err")"
	fi
}
