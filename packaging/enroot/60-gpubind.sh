#!/bin/bash
# gpubind's enroot hook: carries the binding gpubind gave this task into its container. enroot
# starts a container with the image's environment and what its hooks write to $ENROOT_ENVIRON
# (one NAME=value a line), not the caller's: without this hook the GPU visibility lists and
# thread counts gpubind set (and its GPUBIND_* record) stay outside, and enroot's own hooks may set
# OMP_NUM_THREADS=1. The CPUs and memory policy need nothing: the container's processes inherit
# them. Runs after enroot's 50-* hooks; does nothing in a task gpubind did not bind.
# Install: link it into enroot's hooks folder (/etc/enroot/hooks.d) on every node.
set -euo pipefail
[ "${GPUBIND_BOUND-}" = 1 ] || exit 0
: "${ENROOT_ENVIRON:?enroot sets ENROOT_ENVIRON for its hooks}"

carried='^(GPUBIND_[A-Z0-9_]+|CUDA_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|ZE_AFFINITY_MASK|GPU_DEVICE_ORDINAL|OMP_NUM_THREADS|OMP_PLACES|OMP_PROC_BIND)$'
environ=$(cat "${ENROOT_ENVIRON}")
for name in $(compgen -e | grep -E "${carried}" || true); do
  value=${!name}
  # The file is read a line at a time: a value with a newline cannot be carried whole.
  [[ "${value}" != *$'\n'* ]] || continue
  # One line per name: the task's value replaces an earlier hook's or the image's.
  environ=$(grep -v -- "^${name}=" <<<"${environ}" || true)
  environ+=$'\n'"${name}=${value}"
done
printf '%s\n' "${environ#$'\n'}" >"${ENROOT_ENVIRON}"
