#!/usr/bin/env bash
# One call on a lent GPU machine (no network): install the wheelhouse, run the
# stage batch(es), the GPU tests and the report, and leave everything under $OUT.
#   usage: [REPORT=0] [BUILD_STAGES="..."] [BUILD_VARIANTS="stage --define K=V;..."] [BUILD_VARIANTS_FILE=F] [TRY="..."] [QUICK="..."] [TIMELINE="..."] [NCU_SOURCE="..."] [GPUS=all|0,1] [SANITIZE="stage ..." [SANITIZE_KNOBS=JSON]] [PROFILE="stage ..."] [TUNE="stage ..."] tools/device_run.sh "<stagelab run args>;<stagelab run args>..." [pytest-args]
# CALL_LIMIT_S=<the call's timeout_s> cuts each batch's BATCH_TIMEOUT to what is left of the call.
# GPUS adds `--gpus $GPUS` to every batch: one notebook per GPU at a time (nvidia-h200-x2 and larger).
# PYTEST_GPU=0 runs the pytest args on that GPU from the start, beside the batches (give them GPUS=1,2,3);
# its whole output is $OUT/pytest.log.
# Needs `make wheelhouse` beforehand and the folder carried along (carry: ["wheelhouse"]);
# to keep adding to one store across calls, also carry "mlruns" and "runs".
# The copy has no .git of its own (a lent machine may hold the session's starting commit there, which
# `git rev-parse` then wrongly reports): export STAGELAB_GIT_COMMIT=<the commit sent> and STAGELAB_GIT_DIRTY
# in the command, or the records say "unknown".
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 STAGELAB_ROOT="$PWD"
# FlashAttention-4, once `tools/fa4_wheels.sh install` has run on this (warm) machine: every later
# call's contender finds it without remembering the export (a call without it recorded fa4 unavailable).
[ -d /tmp/fa4site ] && export STAGELAB_FA4_SITE="${STAGELAB_FA4_SITE:-/tmp/fa4site}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site wheelhouse/*.whl 2>&1 | tail -2
export PYTHONPATH="$PWD/lib:/tmp/site" PATH="/tmp/site/bin:$PATH"
python3 -m ipykernel install --user --name python3 > /dev/null
# A wheelhouse built before a contender's line was added to `make wheelhouse` lacks it, and every run
# then records that contender as unavailable (s19's first runs lost sageattention so): say so up front.
for contender in sageattention liger_kernel; do
  python3 -c "import $contender" 2>/dev/null || echo "WARNING: $contender is not in the wheelhouse (rebuild it: make wheelhouse)" | tee -a "$OUT/warnings.txt"
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
# One archive (a call brings back at most 8 files): the store, the executed notebooks, the
# pages and the .ncu-rep files of `stagelab profile`; here, `stagelab import <unpacked>/mlruns`
# merges the store into the local one. Taken after every step, so a call that runs past its
# limit still brings back what finished.
# A file over 16 MB does not come back (an H200 acceptance sweep's store was 17.9 MB): a larger
# archive comes back in 15 MB pieces, mlruns.tgz.00, .01, ...; here `cat mlruns.tgz.* > mlruns.tgz`.
snapshot() {
  tar czf "$OUT/mlruns.tgz.new" mlruns runs docs/results build/profile build/ncu_compare 2>/dev/null
  rm -f "$OUT"/mlruns.tgz "$OUT"/mlruns.tgz.[0-9][0-9]
  if [ "$(stat -c %s "$OUT/mlruns.tgz.new")" -gt $((15 * 1024 * 1024)) ]; then
    split -d -b 15M "$OUT/mlruns.tgz.new" "$OUT/mlruns.tgz." && rm -f "$OUT/mlruns.tgz.new"
  else
    mv -f "$OUT/mlruns.tgz.new" "$OUT/mlruns.tgz"
  fi
}
# TRY="<stagelab try args>[;<args>...]": the recorded edit loop first, e.g. TRY="s8_persistent_split
# --define WS_PDL=0 --hypothesis 'PDL off costs the mission its gain'": each spec's trials are built
# in parallel, checked, timed beside the default and the contenders, and recorded as trial runs in
# mlruns (here `stagelab import` merges them back, as batches); the output comes back as try.log.
# `;` separates specs, outside quotes (tools/split_specs.py): a quoted hypothesis may hold one.
mapfile -d '' -t TRY_SPECS < <(python3 tools/split_specs.py "${TRY:-}")
for spec in "${TRY_SPECS[@]}"; do
  [ -n "${spec// }" ] || continue
  echo "=== stagelab try $spec" | tee -a "$OUT/try.log"
  # eval: a spec quotes its hypothesis ('...'), which must reach stagelab as one argument
  eval "timeout ${TRY_TIMEOUT:-540} python3 -m stagelab try $spec --jobs $(nproc)" 2>&1 | grep -v '^\s*$' \
    | tee -a "$OUT/try.log" | tail -40
  snapshot
done
# QUICK="<tools/quick_check.py args>": the old spelling of the edit loop, a wrapper over `stagelab try`
# that records nothing (e.g. QUICK="s9_fp8 --time --variant pp=s9_fp8:PINGPONG=1"); its output comes
# back as quick_check.txt.
if [ -n "${QUICK:-}" ]; then
  echo "=== quick_check $QUICK" | tee "$OUT/quick_check.txt"
  timeout "${QUICK_TIMEOUT:-300}" python3 tools/quick_check.py $QUICK 2>&1 | tee -a "$OUT/quick_check.txt" | tail -40
fi
# NCU_COMPARE="<tools/ncu_compare.py args>[;<args>...]": stages, variants and contenders under ncu
# on one problem per spec, one table each (e.g. NCU_COMPARE="--problem 2x8x2048x128
# s8_persistent_split --contenders cudnn fa4 --record --hypothesis '...'"); the tables come back in
# ncu_compare.md, the reports in the archive (build/ncu_compare/<n>), and with --record each table
# is a trial run in mlruns (here `stagelab import` merges it back). `;` separates specs, outside quotes.
mapfile -d '' -t NCU_SPECS < <(python3 tools/split_specs.py "${NCU_COMPARE:-}")
for i in "${!NCU_SPECS[@]}"; do
  [ -n "${NCU_SPECS[$i]// }" ] || continue
  echo "=== ncu_compare ${NCU_SPECS[$i]}" | tee -a "$OUT/ncu_compare.txt"
  # eval: a spec quotes its hypothesis ('...'), which must reach the tool as one argument
  eval "timeout ${NCU_COMPARE_TIMEOUT:-400} python3 tools/ncu_compare.py ${NCU_SPECS[$i]} --out build/ncu_compare/$i" 2>&1 \
    | tee -a "$OUT/ncu_compare.txt" | tail -40
  cat "build/ncu_compare/$i/ncu_compare.md" >> "$OUT/ncu_compare.md" 2>/dev/null
  snapshot
done
# TIMELINE="<stage> B H S D [causal] [launches] [-DKNOB=v ...][;...]": per-block phase stamps of one
# warp-specialized stage (tools/microbench/sdpa_timeline.cu, -DWS_TIMELINE=1) over `launches` launches
# in one CUDA graph, and each consumer warpgroup's middle-tile step clocks; the summaries come back in
# timeline.txt, each spec's table, chart and CSV in timeline.tgz (build/timeline/timeline-<n>.*). Here
# `tools/timeline_report.py CSV --markdown MD --record STAGE --problem ... --gpu ... --hypothesis ...`
# makes a report a trial run. A binary built here beforehand,
# build/timeline/<name> (carried), is used instead when TIMELINE_BINARIES="<name>[;...]" names it.
IFS=';' read -ra TIMELINE_SPECS <<< "${TIMELINE:-}"
IFS=';' read -ra TIMELINE_BINS <<< "${TIMELINE_BINARIES:-}"
# timeline_spec "<stage> B H S D ... [-DKNOB=v ...]" <carried binary name or ""> <build name>: sets
# `shape` and `bin` (the carried binary where it is there, else the stamped build of the stage).
timeline_spec() {
  local words=() defines=() w
  read -ra words <<< "$1"
  [ "${#words[@]}" -gt 0 ] || return 1
  shape=()
  for w in "${words[@]:1}"; do case "$w" in -D*) defines+=("$w") ;; *) shape+=("$w") ;; esac; done
  bin="build/timeline/$2"
  if [ -z "$2" ] || [ ! -x "$bin" ]; then
    bin="build/timeline/$3"; mkdir -p build/timeline
    nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DWS_TIMELINE=1 "${defines[@]}" \
      -DSTAGE_SOURCE="\"${words[0]}.cu\"" -I kernels/sdpa -o "$bin" tools/microbench/sdpa_timeline.cu || return 1
  fi
}
for i in "${!TIMELINE_SPECS[@]}"; do
  timeline_spec "${TIMELINE_SPECS[$i]}" "${TIMELINE_BINS[$i]:-}" "spec-$i" || continue
  echo "=== timeline ${TIMELINE_SPECS[$i]} ($bin)" | tee -a "$OUT/timeline.txt"
  timeout 120 "$bin" "${shape[@]}" > "build/timeline/timeline-$i.csv" 2>> "$OUT/timeline.txt"
  python3 tools/timeline_report.py "build/timeline/timeline-$i.csv" --plot "build/timeline/timeline-$i.png" \
    --markdown "build/timeline/timeline-$i.md" 2>&1 | tee -a "$OUT/timeline.txt" | tail -30
done
# one archive for the tables, charts and raw stamps (a call brings back at most 8 files)
[ "${#TIMELINE_SPECS[@]}" -eq 0 ] || tar czf "$OUT/timeline.tgz" build/timeline/timeline-*
# NCU_SOURCE="<stage> B H S D [causal] [-DKNOB=v ...][;...]": Nsight Compute's source counters on one
# launch of the stage's kernel in the timeline harness (its stamped build: a few clock reads a tile
# besides the stage's code; TIMELINE_BINARIES names carried builds as for TIMELINE), then
# tools/ncu_source_summary.py: the hot loop's warp samples by stall, opcode and stretch, in
# ncu_source.md. NCU_SOURCE_KERNEL (a regex, default warpspec) picks the kernel among the launches.
IFS=';' read -ra NCU_SOURCE_SPECS <<< "${NCU_SOURCE:-}"
for i in "${!NCU_SOURCE_SPECS[@]}"; do
  timeline_spec "${NCU_SOURCE_SPECS[$i]}" "${TIMELINE_BINS[$i]:-}" "source-$i" || continue
  echo "## ${NCU_SOURCE_SPECS[$i]} ($bin)" >> "$OUT/ncu_source.md"
  report="build/timeline/source-$i"
  # B H S D [causal], then one launch in the harness's graph (its first call, outside the graph, is profiled)
  args=("${shape[@]:0:5}"); [ "${#args[@]}" -eq 5 ] || args+=(0); args+=(1)
  timeout "${NCU_SOURCE_TIMEOUT:-300}" ncu -k "regex:${NCU_SOURCE_KERNEL:-warpspec}" -c 1 --section SourceCounters \
    --section WarpStateStats -o "$report" -f "$bin" "${args[@]}" > "$report.log" 2>&1 \
    || { tail -5 "$report.log" | tee -a "$OUT/ncu_source.md"; continue; }
  ncu --import "$report.ncu-rep" --page source --csv --print-source sass > "$report.csv" \
    && python3 tools/ncu_source_summary.py "$report.csv" >> "$OUT/ncu_source.md" 2>&1
done
if [ -n "${PYTEST_GPU:-}" ] && [ -n "${2:-}" ]; then
  echo "=== pytest $2 (GPU $PYTEST_GPU, beside the batches)"
  CUDA_VISIBLE_DEVICES="$PYTEST_GPU" timeout "${PYTEST_TIMEOUT:-240}" python3 -m pytest -q -s -p no:cacheprovider $2 \
    > "$OUT/pytest.log" 2>&1 &
  pytest_pid=$!
fi
IFS=';' read -ra BATCHES <<< "${1:-}"
# Only batches need a prebuild; a tune-only call ("" as batches) builds what it tunes. The prebuild
# takes the stages the batches name (tools/batch_stages.py; every stage where a batch names none) or
# BUILD_STAGES="s8_persistent_split ..." where given, with the parents their runs time them beside
# (a parent left to the notebook was built inside the batch's time: s18 on long.yaml was killed so).
if [ -n "${1:-}" ]; then
  build_stages="${BUILD_STAGES-$(python3 tools/batch_stages.py "$1")}"
  # a batch with the protocol step (acceptance.yaml) builds each stage twice: the second build, in its
  # notebook, took 130-140 s of an H200 acceptance run, so it is made here beside the first
  protocol_flag=""; [ -n "$(python3 tools/batch_stages.py --step protocol "$1")" ] && protocol_flag="--protocol"
  echo "=== prebuild: ${build_stages:-every stage}, with parents ${protocol_flag:+and protocol builds}"
  # BUILD_VARIANTS="s4_pipeline3 --define PIPELINE_STAGES=1;s4_pipeline3 --define PIPELINE_STAGES=2": more
  # builds beside those, one `stagelab build` a spec; a trial of the same defines finds its build in the
  # cache. For the variants an acceptance notebook's exploration tries (try_variants): s4's run was
  # killed building its pipeline depths there (2026-11-29). BUILD_VARIANTS_FILE adds a file's specs, one
  # a line (tools/explore_variants.txt: the acceptance explorations').
  variant_lines="${BUILD_VARIANTS:-}"
  [ -z "${BUILD_VARIANTS_FILE:-}" ] || variant_lines="$variant_lines;$(grep -v '^\s*#' "$BUILD_VARIANTS_FILE" | paste -sd';')"
  IFS=';' read -ra VARIANT_SPECS <<< "$variant_lines"
  variant_pids=(); variant_specs=()
  for spec in "${VARIANT_SPECS[@]}"; do
    [ -n "${spec// }" ] || continue
    timeout "${PREBUILD_TIMEOUT:-300}" python3 -m stagelab build $spec --jobs 1 > "/tmp/variant-${#variant_pids[@]}.log" 2>&1 &
    variant_pids+=($!); variant_specs+=("$spec")
  done
  timeout "${PREBUILD_TIMEOUT:-300}" python3 -m stagelab build $build_stages --with-parents $protocol_flag \
    --jobs "${BUILD_JOBS:-$(nproc)}" 2>&1 | tail -"${PREBUILD_TAIL:-8}"
  for i in "${!variant_pids[@]}"; do
    wait "${variant_pids[$i]}" || echo "WARNING: variant build ${variant_specs[$i]} failed (exit $?; 124: past PREBUILD_TIMEOUT)"
    echo "variant ${variant_specs[$i]}: $(tail -1 "/tmp/variant-$i.log")"
  done
fi
for batch in "${BATCHES[@]}"; do
  [ -n "$batch" ] || continue
  [ -z "${GPUS:-}" ] || batch="$batch --gpus $GPUS"
  echo "=== stagelab run $batch"
  start=$(date +%s)
  # CALL_LIMIT_S (the call's timeout_s): a batch stops in time for its snapshot, so the stages that
  # finished come back even where the call's last stage does not (the lent machine kills the whole
  # call at its limit, snapshot included); it leaves 20 s for the snapshot.
  batch_timeout="${BATCH_TIMEOUT:-480}"
  if [ -n "${CALL_LIMIT_S:-}" ]; then
    left=$(( CALL_LIMIT_S - SECONDS - 20 ))
    [ "$left" -gt 0 ] || { echo "=== skipped (CALL_LIMIT_S reached): $batch" | tee -a "$OUT/batch.log"; continue; }
    [ "$left" -ge "$batch_timeout" ] || batch_timeout="$left"
  fi
  # --deadline: a stage whose last whole run would not end before the timeout is not started (run.deadline)
  timeout "$batch_timeout" python3 -m stagelab run $batch --deadline "$batch_timeout" 2>&1 | grep -v '^\s*$' | tee -a "$OUT/batch.log"
  echo "=== elapsed $(( $(date +%s) - start ))s for: $batch" | tee -a "$OUT/batch.log"
  snapshot
done
for stage in ${TUNE:-}; do
  echo "=== stagelab tune $stage" | tee -a "$OUT/tune.log"
  timeout "${TUNE_TIMEOUT:-540}" python3 -m stagelab tune "$stage" --params "${TUNE_PARAMS:-params/acceptance.yaml}" \
    --jobs "$(nproc)" 2>&1 | grep -v '^\s*$' | tee -a "$OUT/tune.log"
  snapshot
done
# Stage runs sanitize and profile on their own; these print the verdicts of stages outside a batch.
for stage in ${SANITIZE:-}; do
  echo "=== stagelab sanitize $stage" | tee -a "$OUT/sanitizer.log"
  # SANITIZE_KNOBS='{"FORCE_POLICY": 1}': a policy the sanitize problems would not pick on their own
  timeout "${SANITIZE_TIMEOUT:-600}" python3 -m stagelab sanitize "$stage" ${SANITIZE_KNOBS:+--knobs "$SANITIZE_KNOBS"} 2>&1 \
    | tail -40 | tee -a "$OUT/sanitizer.log"
done
for stage in ${PROFILE:-}; do
  echo "=== stagelab profile $stage" | tee -a "$OUT/profile.log"
  timeout "${PROFILE_TIMEOUT:-600}" python3 -m stagelab profile "$stage" --params "${PROFILE_PARAMS:-params/mission.yaml}" 2>&1 | tail -40 | tee -a "$OUT/profile.log"
done
if [ -n "${pytest_pid:-}" ]; then
  wait "$pytest_pid"; echo "=== pytest (beside the batches) exit $?"; tail -25 "$OUT/pytest.log"
elif [ -n "${2:-}" ]; then
  echo "=== pytest $2"
  timeout "${PYTEST_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider $2 2>&1 | tail -25 | tee "$OUT/pytest.log"
fi
# REPORT=0 leaves the pages to the machine that imports the store (saves a minute of device time).
if [ "${REPORT:-1}" = 1 ]; then
  python3 -m stagelab report --family sdpa --params acceptance long mission 2>&1 | tail -2
  # every other family on its own parameter files (Family.report_params); REPORT_FAMILIES adds
  # families found on STAGELAB_FAMILY_PATH (e.g. REPORT_FAMILIES=silu for examples/families)
  for family in softmax rmsnorm ${REPORT_FAMILIES:-}; do
    python3 -m stagelab report --family "$family" 2>&1 | tail -2
  done
fi
snapshot
ls -la "$OUT"
