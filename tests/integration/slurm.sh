# slurm.sh — a private Slurm for the integration tests (sourced after lib.sh).
#
# it_slurm — munged, slurmctld and two slurmd (Slurm nodes ms1 and ms2, 4 CPUs
# each, both on this machine at 127.0.0.1) from a config written into
# $WORK/slurm, on ports from it_port; exports SLURM_CONF (so sbatch, srun,
# squeue, scancel use it) and MS_SLURM_DIR=$WORK/slurm/jobs (pair.sbatch's job
# folders); returns once both nodes are idle. On exit every job is cancelled
# and waited for before lib.sh stops the daemons. Skips (77) without root
# (slurmd runs the jobs as root here) or where tools/install-deps.sh cannot
# install slurm-wlm and munge.
# Two slurmd, not one: Slurm's backfill scheduler (the only one that starts
# heterogeneous jobs) reserves whole nodes for a pending component, so the two
# components of one job are never placed on the same Slurm node (seen with
# 22.05; node_space_map_t is a node bitmap in the current sources too).
IT_SLURM_PIDS=()
# it_slurm_bg LOG CMD... — a daemon of this test, kept in the foreground
it_slurm_bg() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 </dev/null &
  IT_SLURM_PIDS+=($!)
  echo $! >>"$WORK/.pids" # the watchdog's list, should this shell be killed outright
}

# it_slurm_stop — cancel every job, wait (bounded) until the queue is empty,
# then stop the daemons, slurmd first (IT_CLEANUP; lib.sh's own list is stopped
# before IT_CLEANUP runs, which would leave the jobs' steps without a slurmd).
it_slurm_stop() {
  local i
  if [ -n "$(squeue -h -o %A 2>/dev/null)" ]; then
    # shellcheck disable=SC2046 # one word per job id
    scancel --full $(squeue -h -o %A 2>/dev/null) 2>/dev/null
    for _ in $(seq 1 120); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.25; done
  fi
  for ((i = ${#IT_SLURM_PIDS[@]} - 1; i >= 0; i--)); do it_stop "${IT_SLURM_PIDS[$i]}"; done
}

it_slurm() {
  [ "$(id -u)" = 0 ] || it_skip "slurmd runs jobs as root here (SlurmdUser=root): needs root"
  it_need_cmds munged slurmctld slurmd sbatch srun scancel squeue scontrol sinfo
  local S=$WORK/slurm ctld_port d1_port d2_port host deadline
  mkdir -p "$S/munge" "$S/state" "$S/jobs"
  chmod 711 "$S/munge"
  ( umask 077 && head -c 1024 /dev/urandom >"$S/munge/key" )
  ctld_port=$(it_port) d1_port=$(it_port) d2_port=$(it_port)
  host=$(hostname -s)
  cat >"$S/slurm.conf" <<EOF
# written by $IT_NAME (tests/integration/slurm.sh)
ClusterName=mstest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge/sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,bf_hetjob_immediate
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=ms1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$d1_port CPUs=4
NodeName=ms2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$d2_port CPUs=4
PartitionName=ms Nodes=ms1,ms2 Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$S/slurm.conf MS_SLURM_DIR=$S/jobs
  IT_MORE_LOGS="$S/jobs/slurm-*.out $S/jobs/*/*.log" # each job's batch output and its nodes' logs
  IT_CLEANUP=it_slurm_stop
  it_slurm_bg "$WORK/munged.log" munged -F --force --socket="$S/munge/sock" --key-file="$S/munge/key" \
    --pid-file="$S/munge/pid" --log-file="$S/munge/log" --seed-file="$S/munge/seed"
  for _ in $(seq 1 100); do [ -S "$S/munge/sock" ] && break; sleep 0.05; done
  [ -S "$S/munge/sock" ] || it_die "munged did not create its socket"
  it_slurm_bg "$WORK/slurmctld.log" slurmctld -D -i
  it_slurm_bg "$WORK/slurmd-ms1.log" slurmd -D -N ms1
  it_slurm_bg "$WORK/slurmd-ms2.log" slurmd -D -N ms2
  deadline=$((SECONDS + 60))
  until [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$')" = 2 ] || [ $SECONDS -ge $deadline ]; do sleep 0.2; done
  [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$')" = 2 ] || it_die "Slurm nodes not idle: $(sinfo -N 2>&1)"
  it_log "Slurm up: $(sinfo -h -N -o '%N:%T' | tr '\n' ' ')"
}
