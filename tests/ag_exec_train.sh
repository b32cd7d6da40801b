#!/bin/sh
# ag_exec_train — tests/ag_exec_losses.sh over three steps: the plain
# loop's backward and Adam against the fused engine's, loss by loss.
ZS_AG_STEPS=3
export ZS_AG_STEPS
exec "${SHELL:-/bin/sh}" "${srcdir:-.}/tests/ag_exec_losses.sh"
