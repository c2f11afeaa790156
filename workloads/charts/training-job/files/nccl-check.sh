# The NCCL check (ncclCheck.enabled), run by bash in every pod of the Job. Pod 0 runs the nccl-tests
# benchmark over MPI across all pods (mpirun reaches the others by ssh, as upstream's A3 NCCL tests
# do) and judges the result with nccl_busbw.awk; the other pods only serve ssh. The Job's success
# policy ends it when pod 0 succeeds, and its failure policy fails it when pod 0 fails.
set -euo pipefail

for name in JOB_COMPLETION_INDEX NCCL_CHECK_HOSTS NCCL_CHECK_BENCHMARK NCCL_CHECK_MIN_BYTES \
    NCCL_CHECK_MAX_BYTES NCCL_CHECK_ITERATIONS NCCL_CHECK_MIN_BUSBW NCCL_CHECK_CPUS \
    NCCL_CHECK_GPUS_PER_NODE NCCL_CHECK_AWK; do
  if [ -z "${!name:-}" ]; then
    echo "NCCL check FAILED: environment variable $name is not set (the chart sets it)"
    exit 2
  fi
done
scripts_dir=${NCCL_CHECK_SCRIPTS_DIR:-/scripts}          # the plugin image's ssh/hostfile helpers
tests_dir=${NCCL_CHECK_TESTS_DIR:-/third_party/nccl-tests-mpi/build}
log=${NCCL_CHECK_LOG:-/tmp/nccl-check.log}

service ssh restart
if [ "$JOB_COMPLETION_INDEX" != 0 ]; then
  echo "Pod $JOB_COMPLETION_INDEX serves ssh for pod 0's mpirun until the Job ends"
  exec sleep infinity
fi

read -r -a hosts <<< "$NCCL_CHECK_HOSTS"
"$scripts_dir/init_ssh.sh" "${hosts[@]}"
(cd "$scripts_dir" && ./gen_hostfiles.sh "${hosts[@]}")
hostfile="$scripts_dir/hostfiles${#hosts[@]}/hostfile$NCCL_CHECK_GPUS_PER_NODE"

# ssh gives the remote ranks a clean environment: forward the NCCL settings explicitly.
forwarded=()
for name in $(compgen -e); do
  case $name in NCCL_CHECK_*) ;; NCCL_*|LD_LIBRARY_PATH) forwarded+=(-x "$name") ;; esac
done

echo "Running $NCCL_CHECK_BENCHMARK on ${#hosts[@]} nodes x $NCCL_CHECK_GPUS_PER_NODE GPUs: ${hosts[*]}"
set +e
OMPI_MCA_orte_keep_fqdn_hostnames=t mpirun --allow-run-as-root --bind-to none \
  --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca plm_rsh_no_tree_spawn true \
  -np $(( NCCL_CHECK_GPUS_PER_NODE * ${#hosts[@]} )) --hostfile "$hostfile" "${forwarded[@]}" \
  taskset -c "$NCCL_CHECK_CPUS" "$tests_dir/$NCCL_CHECK_BENCHMARK" \
  -b "$NCCL_CHECK_MIN_BYTES" -e "$NCCL_CHECK_MAX_BYTES" -f 2 -g 1 -w 5 -n "$NCCL_CHECK_ITERATIONS" -c 0 \
  2>&1 | tee "$log"
mpirun_status=${PIPESTATUS[0]}
set -e
if [ "$mpirun_status" != 0 ]; then
  echo "NCCL check FAILED: mpirun exited $mpirun_status before the benchmark finished (log above)"
  exit 1
fi
exec awk -v min="$NCCL_CHECK_MIN_BUSBW" "$NCCL_CHECK_AWK" "$log"
