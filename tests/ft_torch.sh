#!/bin/sh
# ft_torch — fine-tuning's reference side (issue #23): real PyTorch
# training the tiny gpt2/llama (report/models/*.json) with gradient
# accumulation, frozen parameters, LoRA (PEFT v0.20.0's layer) and DDP over
# gloo (tests/ft_torch.py), and the reference's own invariants, which need
# no zerosim side:
#   - accumulation: K = 2 micro-batches of 1 give the loss and the gradient
#     norm of one batch of 2 (the same tokens) to 1e-5 relative;
#   - DDP N = 2, K = 2: with no_sync() the first micro-step makes no
#     all-reduce and the last does; without it both do; the losses agree;
#   - frozen parameters: no grad and no Adam state for any frozen one
#     between steps; the frozen names are the ones the pattern means; fewer
#     bytes saved by autograd at the end of forward than full training;
#   - LoRA: the trainable count is PEFT's r*(in+out) per adapted module,
#     worked here from the config's shapes; the base holds no grad or Adam
#     state; dropout > 0 keeps more at the end of forward than dropout 0.
# Bytes other than the states (buffers, token ids) must be the same in
# every plain-loop run.
#
# `tests/ft_torch.sh table`: tests/ft_torch.py --table for both models.
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# Exit 0 pass, 1 an invariant broken, 99 hard error.
set -u
src=${srcdir:-.}
name=ft_torch
. "$src/tests/torch_python.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-ft.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
export PYTHONDONTWRITEBYTECODE=1
gpt2=$src/report/models/gpt2-tiny.json
llama=$src/report/models/llama-tiny.json

if [ "${1:-}" = table ]; then
	exec "$py" "$src/tests/ft_torch.py" --table --model "$gpt2" --model "$llama"
fi

# run TAG ARGS...: tests/ft_torch.py's JSON in $tmp/TAG.json
run() {
	tag=$1
	shift
	# gloo waits 30 minutes for a peer by default: a hang ends in 5.
	if ! timeout 300 "$py" "$src/tests/ft_torch.py" "$@" --out "$tmp/$tag.json" >"$tmp/err" 2>&1; then
		echo "ft_torch: FAIL: tests/ft_torch.py $*:" >&2
		tail -20 "$tmp/err" >&2
		exit 99
	fi
}

for m in gpt2 llama; do
	cfg=$gpt2
	[ "$m" = llama ] && cfg=$llama
	run "$m-full" --model "$cfg"
	run "$m-b1k2" --model "$cfg" --batch 1 --grad-accum 2
	run "$m-emb" --model "$cfg" --freeze embeddings
	run "$m-abl" --model "$cfg" --freeze all-but-last:1
	run "$m-lora" --model "$cfg" --lora-r 4
	run "$m-lora-all" --model "$cfg" --lora-r 4 --lora-targets all-linear
	run "$m-lora-all-drop" --model "$cfg" --lora-r 4 --lora-targets all-linear --lora-dropout 0.1
done
run ddp-sync --model "$gpt2" --world 2 --grad-accum 2
run ddp-nosync0 --model "$gpt2" --world 2 --grad-accum 2 --no-sync 0

"$py" - "$tmp" "$gpt2" "$llama" <<'EOF'
import json, os, sys
tmp, paths = sys.argv[1], dict(gpt2=sys.argv[2], llama=sys.argv[3])
bad = []


def load(t):
    return json.load(open(os.path.join(tmp, t + ".json")))


def rel(x, y):
    return abs(x - y) / max(abs(x), abs(y), 1e-30)


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        bad.append(what)


def others(d):
    p = d["persistent"]
    return d["between_steps"][-1] - p["params_trainable"] - p["params_frozen"] - p["grads_trainable"] - \
        p["adam_trainable"] - p["grads_frozen"] - p["adam_frozen"]


def shapes(m):
    """(name, in, out) of every Linear/Conv1D but the head, from the config."""
    c = json.load(open(paths[m]))
    out = []
    if m == "gpt2":
        d = c["n_embd"]
        inner = c.get("n_inner") or 4 * d
        for i in range(c["n_layer"]):
            p = f"transformer.h.{i}."
            out += [(p + "attn.c_attn", d, 3 * d), (p + "attn.c_proj", d, d), (p + "mlp.c_fc", d, inner),
                    (p + "mlp.c_proj", inner, d)]
    else:
        d, f = c["hidden_size"], c["intermediate_size"]
        h = c["num_attention_heads"]
        kv = c.get("num_key_value_heads") or h
        hd = d // h
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            out += [(p + "self_attn.q_proj", d, h * hd), (p + "self_attn.k_proj", d, kv * hd),
                    (p + "self_attn.v_proj", d, kv * hd), (p + "self_attn.o_proj", h * hd, d),
                    (p + "mlp.gate_proj", d, f), (p + "mlp.up_proj", d, f), (p + "mlp.down_proj", f, d)]
    return out


for m in ("gpt2", "llama"):
    full, acc = load(m + "-full"), load(m + "-b1k2")
    # accumulation: the same tokens, one batch of 2 or two micro-batches of 1
    check(rel(full["losses"][0], acc["losses"][0]) < 1e-5 and rel(full["grad_norms"][0], acc["grad_norms"][0]) < 1e-5,
          f"{m}: K=2 x batch 1 loss {acc['losses'][0]:.8f} grad norm {acc['grad_norms'][0]:.8f} = batch 2's "
          f"{full['losses'][0]:.8f} {full['grad_norms'][0]:.8f} (1e-5 relative)")
    check(all(rel(x, y) < 1e-4 for x, y in zip(full["losses"], acc["losses"])),
          f"{m}: K=2 losses {acc['losses']} follow batch 2's {full['losses']} (1e-4 relative, Adam amplifies rounding)")
    ref_other = others(full)
    for tag in ("emb", "abl", "lora", "lora-all", "lora-all-drop"):
        d = load(f"{m}-{tag}")
        p = d["persistent"]
        check(p["grads_frozen"] == 0 and p["adam_frozen"] == 0 and p["params_frozen"] > 0,
              f"{m} {tag}: frozen params {p['params_frozen']:,} B hold no grad and no Adam state between steps")
        check(len(set(d["between_steps"])) == 1 and others(d) == ref_other,
              f"{m} {tag}: between steps {d['between_steps'][-1]:,} = states + the same {ref_other:,} B "
              f"(buffers, token ids) as full training")
        # (dropout's copies can keep more than full training: not checked there)
        check(tag.endswith("drop") or d["fwd_end_over_start"][0] < full["fwd_end_over_start"][0],
              f"{m} {tag}: autograd keeps {d['fwd_end_over_start'][0]:,} B at the end of forward, "
              f"less than full training's {full['fwd_end_over_start'][0]:,}")
    emb = load(m + "-emb")
    want = {"gpt2": ["transformer.wpe.weight", "transformer.wte.weight"],
            "llama": ["model.embed_tokens.weight"]}[m]
    check(emb["frozen_names"] == want, f"{m}: --freeze embeddings froze {emb['frozen_names']}")
    abl = load(m + "-abl")
    L = max(int(n.split(".")[2]) for n, _, _ in shapes(m)) + 1
    check(all(not n.split(".")[2].isdigit() or int(n.split(".")[2]) < L - 1 for n in abl["frozen_names"]
              if ".h." in n or ".layers." in n) and not any(f".{L - 1}." in n for n in abl["frozen_names"]),
          f"{m}: --freeze all-but-last:1 leaves block {L - 1} trainable ({len(abl['frozen_names'])} frozen)")
    # LoRA: PEFT's count, r*(in+out) per adapted module, from the config
    for tag, targets in (("lora", {"gpt2": ("attn.c_attn",), "llama": ("q_proj", "v_proj")}[m]),
                         ("lora-all", None)):
        d = load(f"{m}-{tag}")
        mods = [(n, i, o) for n, i, o in shapes(m) if targets is None or n.endswith(targets)]
        want = sum(4 * (i + o) for _, i, o in mods)
        check(d["trainable"] == want and sorted(d["lora"]["targets"]) == sorted(n for n, _, _ in mods),
              f"{m} {tag}: trainable {d['trainable']:,} = r*(in+out) over {len(mods)} adapted modules = {want:,}")
    d0, d1 = load(m + "-lora-all"), load(m + "-lora-all-drop")
    check(d1["fwd_end_over_start"][0] > d0["fwd_end_over_start"][0],
          f"{m}: LoRA dropout 0.1 keeps {d1['fwd_end_over_start'][0] - d0['fwd_end_over_start'][0]:,} B more "
          f"at the end of forward than dropout 0")

s, n = load("ddp-sync"), load("ddp-nosync0")
check(s["allreduce_per_micro"][0] == 0 and s["allreduce_per_micro"][-1] > 0,
      f"DDP N=2 K=2 no_sync: all-reduces per micro-step {s['allreduce_per_micro']} (none on the first)")
check(all(x > 0 for x in n["allreduce_per_micro"]),
      f"DDP N=2 K=2 without no_sync: all-reduces per micro-step {n['allreduce_per_micro']}")
check(all(rel(x, y) < 1e-5 for x, y in zip(s["losses"], n["losses"])),
      f"DDP N=2 K=2: losses with and without no_sync agree: {s['losses']} {n['losses']}")
sys.exit(1 if bad else 0)
EOF
