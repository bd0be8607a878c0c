# Sourced by the Slurm tests: a work folder and a one-node cluster in it (local-cluster.sh),
# both removed on exit, also on a kill (ctest's timeout, Ctrl-C). Exits 77 (skipped) with the
# reason where Slurm cannot be started. Sets `work` and exports SLURM_CONF.
#   source "$(dirname "$0")/test-cluster.sh" NAME
slurm_test_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/prefetchlab-${1:-slurm}-XXXXXX")
cleanup() {
  "$slurm_test_dir/local-cluster.sh" stop "$work/cluster" || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
status=0
"$slurm_test_dir/local-cluster.sh" start "$work/cluster" >"$work/env" || status=$?
((status == 0)) || exit "$status"  # 77: skipped, the reason is on stderr
source "$work/env"
