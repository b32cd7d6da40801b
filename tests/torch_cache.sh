#!/bin/sh
# torch_cache.sh ARGS...: the python tests/torch_python.sh hands the
# PyTorch tests when ZS_TORCH_CACHE names a folder: a reference script
# (tests/*_torch.py) runs through tests/torch_cache.py, which keeps its
# results there for a second make check-torch (another build's);
# anything else (python3 -c, python3 -, the tests' own comparisons) is
# ZS_TORCH_PY's python itself.
case ${1:-} in
*_torch.py) exec "$ZS_TORCH_PY" "$(dirname "$0")/torch_cache.py" "$@" ;;
*) exec "$ZS_TORCH_PY" "$@" ;;
esac
