# moe_lib — sourced by tests/moe_step.sh and tests/moe_theory.sh (after
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
