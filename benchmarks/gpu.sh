#!/usr/bin/env bash
# The GPU benchmark in one command (see benchmarks/GPU_RUN.md): correctness on the device, decode step time
# against the memory floor, streaming load against concurrency, transformers' continuous batching; the table
# is printed last and saved to benchmarks/results/. `--tiny` runs the same code paths on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--tiny" ]]; then
    # Triton kernels run in its interpreter on the CPU; it must be chosen before they are compiled.
    export TRITON_INTERPRET=1
fi
exec "${PYTHON:-python}" -m benchmarks.gpu_bench "$@"
