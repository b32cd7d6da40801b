# moe_configs — sourced by tests/ds_moe_wrapper.sh, ds_moe_torch.sh, ds_torch.sh,
# qwen_moe.sh and qwen3_moe.sh:
# moe_configs DIR writes into DIR the tiny mixtures they run: mixtral.json
# (tests/moe_lib.sh's: d 64, F 96, 2 blocks, 4 experts, top 2),
# qwen2_moe.json (tests/qwen_moe.sh's, its shared expert 80 wide) and
# qwen3_moe.json (tests/qwen3_moe.sh's, q/k norms, renormalised top 2).
moe_configs() {
	cat >"$1/mixtral.json" <<'JSON'
{"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
 "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 64, "max_position_embeddings": 32,
 "num_local_experts": 4, "num_experts_per_tok": 2, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0}
JSON
	cat >"$1/qwen2_moe.json" <<'JSON'
{"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
 "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 64, "max_position_embeddings": 32,
 "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 48, "shared_expert_intermediate_size": 80,
 "norm_topk_prob": false, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0}
JSON
	cat >"$1/qwen3_moe.json" <<'JSON'
{"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
 "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 16, "vocab_size": 64, "max_position_embeddings": 32,
 "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 48, "norm_topk_prob": true,
 "decoder_sparse_step": 1, "mlp_only_layers": [], "rms_norm_eps": 1e-06, "rope_theta": 1000000.0}
JSON
}
