#!/usr/bin/env bash
# The GPU verifier on a real GPU, three ways: idle, while memory grows (a torch
# process allocates 2 GiB a second), and while that memory is held steady.
# Run from the repo root: bash tests/steps/device_verify.sh. Needs python3, click
# and nvidia-smi (torch only for the load); the verdicts go to stdout, logs to $OUT.
set -u
export PYTHONPATH=.
out=${OUT:-/tmp}
V=(python3 -m remediator.steps verify-gpu-memory --interval 1 --max-spread-mib 256 --node "${NODE_NAME:-h200}")
echo "## date: $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import click, sys; print("python", sys.version.split()[0], "click", click.__version__)'

verify() {
    local name=$1; shift
    echo "## $name"
    echo "\$ remediator step verify-gpu-memory --interval 1 --max-spread-mib 256 $*"
    "${V[@]}" "$@" 2>"$out/$name.log"
    echo "exit code: $?"
}

wait_for() {  # a file, at most 60 s
    for _ in $(seq 300); do [ -f "$1" ] && return 0; sleep 0.2; done
    echo "gave up waiting for $1"; return 1
}

verify idle --samples 5 --incident device-idle

rm -f /tmp/ready /tmp/held
python3 - <<'EOF' &
import pathlib, time
import torch
torch.ones(1, device="cuda"); torch.cuda.synchronize()
pathlib.Path("/tmp/ready").write_text("1")
bufs = []
for _ in range(10):
    bufs.append(torch.ones(2 << 30, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    time.sleep(1)
pathlib.Path("/tmp/held").write_text("1")
time.sleep(30)
EOF
load=$!
wait_for /tmp/ready && verify growing --samples 6 --incident device-growing
wait_for /tmp/held && sleep 1 && verify held --samples 6 --incident device-held
kill "$load" 2>/dev/null; wait
