# torch_python.sh — sourced by the tests that run PyTorch (tfm_torch.sh,
# fsdp_torch.sh): sets py to the first of $PYTHON, Debian's
# /usr/bin/python3 and the python3 on PATH (one earlier on PATH may lack
# torch) that imports torch; without one, skips the test named $name with
# a message (exit 77, automake's skip).
py=""
for p in ${PYTHON:-} /usr/bin/python3 python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then
		py=$p
		break
	fi
done
if [ -z "$py" ]; then
	echo "SKIP: $name: no python3 here imports torch (Debian: apt-get install python3-torch)"
	exit 77
fi
