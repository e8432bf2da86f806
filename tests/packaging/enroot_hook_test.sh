#!/usr/bin/env bash
# packaging/enroot/60-gpubind.sh as enroot runs its hooks (hooks.d: the task's environment, and
# ENROOT_ENVIRON naming the container's environment file that enroot's 50-* hooks wrote): a task
# gpubind-run bound (its real environment, from a fixture) has its binding's variables carried in,
# replacing what an earlier hook set; nothing else of the task is; an unbound task changes nothing.
# Usage: enroot_hook_test.sh HOOK GPUBIND_RUN FIXTURES
set -uo pipefail
hook=$1
runner=$2
fixtures=$3
tmp=$(mktemp -d /tmp/gpubind-enroot-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; shift; printf '     %s\n' "$@"; failed=$((failed + 1)); }
: >"$tmp/empty.conf"

# What the image and enroot's own hooks leave (an image's OMP_NUM_THREADS; enroot's PyTorch hook
# adds OMP_NUM_THREADS=1 where the image has none).
image_environ() {
  printf '%s\n' PATH=/usr/local/bin:/usr/bin PYTORCH_VERSION=2.5.1 OMP_NUM_THREADS=64 >"$tmp/environ"
}

# Worker 1 of 2 bound by gpubind-run on LUMI-G, then enroot running the hook in its environment.
image_environ
env -i PATH="$PATH" LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 UNRELATED=kept-outside "$runner" \
  --plugstack "$tmp/empty.conf" --topology "$fixtures/lumi-g.xml" \
  env ENROOT_ENVIRON="$tmp/environ" "$hook" 2>"$tmp/err"
rc=$?
env -i PATH="$PATH" LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 "$runner" --plugstack "$tmp/empty.conf" \
  --topology "$fixtures/lumi-g.xml" env >"$tmp/task" 2>/dev/null
expected=$(grep -E '^(GPUBIND_[A-Z0-9_]+|CUDA_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|ZE_AFFINITY_MASK|GPU_DEVICE_ORDINAL|OMP_NUM_THREADS|OMP_PLACES|OMP_PROC_BIND)=' "$tmp/task" | sort)
carried=$(grep -vE '^(PATH|PYTORCH_VERSION)=' "$tmp/environ" | sort)
threads=$(grep '^OMP_NUM_THREADS=' "$tmp/task")
[[ $rc -eq 0 && -n "$expected" && "$carried" == "$expected" && "$(grep -c '^OMP_NUM_THREADS=' "$tmp/environ")" -eq 1 &&
  "$(grep '^OMP_NUM_THREADS=' "$tmp/environ")" == "$threads" && "$(grep -c '^ROCR_VISIBLE_DEVICES=' "$tmp/environ")" -eq 1 ]] &&
  ok "a bound task: its $(wc -l <<<"$expected") binding variables carried in ($threads replaces the image's 64)" ||
  bad "a bound task" "rc=$rc $(cat "$tmp/err")" "expected: $expected" "environ: $(cat "$tmp/environ")"
grep -q '^PATH=/usr/local/bin:/usr/bin$' "$tmp/environ" && grep -q '^PYTORCH_VERSION=' "$tmp/environ" &&
  ! grep -q UNRELATED "$tmp/environ" && ok "the image's other variables stay, the task's others stay out" ||
  bad "other variables" "$(cat "$tmp/environ")"

# A task gpubind did not bind: the file is left as enroot's hooks wrote it.
image_environ
cp "$tmp/environ" "$tmp/before"
env -i PATH="$PATH" CUDA_VISIBLE_DEVICES=3 ENROOT_ENVIRON="$tmp/environ" "$hook"
[[ $? -eq 0 ]] && cmp -s "$tmp/before" "$tmp/environ" && ok "an unbound task: nothing changed" ||
  bad "unbound task" "$(cat "$tmp/environ")"

# A value with a newline cannot be one line of the file: left out, the rest carried.
image_environ
env -i PATH="$PATH" GPUBIND_BOUND=1 GPUBIND_CPUS=0-7 OMP_PLACES=$'cores\nINJECTED=1' \
  ENROOT_ENVIRON="$tmp/environ" "$hook"
grep -q '^GPUBIND_CPUS=0-7$' "$tmp/environ" && ! grep -q INJECTED "$tmp/environ" &&
  ok "a value with a newline is not carried (no line of its own)" || bad "newline" "$(cat "$tmp/environ")"

# Outside enroot: a clear message, non-zero.
out=$(env -i PATH="$PATH" GPUBIND_BOUND=1 "$hook" 2>&1)
[[ $? -ne 0 && "$out" == *ENROOT_ENVIRON* ]] && ok "without ENROOT_ENVIRON: fails naming it" || bad "no ENROOT_ENVIRON" "$out"

echo "$passed passed, $failed failed"
((failed == 0))
