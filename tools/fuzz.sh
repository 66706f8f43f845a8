#!/usr/bin/env bash
# Runs the libFuzzer targets (tools/fuzz.bzl's ps_fuzz_test): builds them with --config=fuzz
# (clang, ASan, UBSan), starts each corpus from the target's in-code seeds and corpus files, runs
# each target for SECONDS, and prints one line per target: executions, executions per second,
# coverage (edges and features), corpus size and peak memory.
#
# A crash, sanitizer report, failed CHECK, timeout or out-of-memory stops with exit status 1 and
# names the input that caused it: copy it into the target's testdata/fuzz/<target>/ directory,
# where the target's replay test (<target>_test) runs it in every `bazel test`, and fix the code.
#
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  per target (default 60); tools/test.sh runs every target 5 s, docs/fuzzing.md
#            records 10-minute runs.
#   TARGET   a fuzzer's label, e.g. //common/cluster:cluster_spec_fuzzer (default: every fuzzer).
#   FUZZ_OUT=DIR keeps the corpora, logs and findings there (default: a temporary directory,
#   removed when nothing was found).
#   FUZZ_SEED=N makes libFuzzer's choices repeatable (tools/test.sh uses 1); default: random.
set -euo pipefail

cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(bazel query --noshow_progress 'attr(tags, "\bfuzzer\b", //...)' 2>/dev/null)
fi

out="${FUZZ_OUT:-}"
keep=1
if [[ -z "$out" ]]; then
  out="$(mktemp -d)"
  keep=0
fi
mkdir -p "$out"

echo "fuzz: building ${#targets[@]} targets with --config=fuzz (clang, ASan, UBSan)"
build_log="$out/build.log"
if ! bazel build --config=fuzz --noshow_progress "${targets[@]}" >"$build_log" 2>&1; then
  grep -v "Cannot export local symbol" "$build_log" | grep -E "ERROR|error:" | head -n 20 >&2
  echo "fuzz: the build failed (the whole log: $build_log)" >&2
  exit 1
fi
bin="$(bazel info --config=fuzz bazel-bin 2>/dev/null)"

# A source file's path in the workspace: //config:clusters/local.json -> config/clusters/local.json.
label_path() {
  local label="${1#//}"
  label="${label/://}"
  echo "${label#/}"
}

found=0
summary=()
for target in "${targets[@]}"; do
  package="${target#//}"
  package="${package%%:*}"
  name="${target##*:}"         # cluster_spec_fuzzer
  fuzz="${name%er}"            # cluster_spec_fuzz
  [[ -x "$bin/$package/$name" ]] || { echo "fuzz: $target was not built" >&2; exit 1; }
  # A copy: a later build (of any configuration) may replace what bazel-bin holds.
  mkdir -p "$out/bin"
  binary="$out/bin/$name"
  cp -f "$bin/$package/$name" "$binary"

  corpus="$out/corpus/$fuzz"
  mkdir -p "$corpus" "$out/findings"
  PS_FUZZ_SEEDS_OUT="$corpus" "$binary" >/dev/null
  while read -r label; do
    [[ -n "$label" ]] && cp "$(label_path "$label")" "$corpus/"
  done < <(bazel query --noshow_progress "kind('source file', deps(//$package:${fuzz}_corpus))" 2>/dev/null)

  log="$out/$fuzz.log"
  status=0
  GLOG_minloglevel=2 "$binary" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -seed="${FUZZ_SEED:-0}" -artifact_prefix="$out/findings/$fuzz-" "$corpus" >"$log" 2>&1 || status=$?

  stat() { grep -oE "^stat::$1: *[0-9]+" "$log" | grep -oE "[0-9]+$" || echo "?"; }
  done_line="$(grep -E "^#[0-9]+.*(DONE|cov:)" "$log" | tail -n 1 || true)"
  cov="$(grep -oE "cov: [0-9]+" <<<"$done_line" | grep -oE "[0-9]+" || echo "?")"
  ft="$(grep -oE "ft: [0-9]+" <<<"$done_line" | grep -oE "[0-9]+" || echo "?")"
  corp="$(grep -oE "corp: [0-9]+" <<<"$done_line" | grep -oE "[0-9]+" || echo "?")"
  line="$(printf "%-22s %5ss  execs %10s  execs/s %7s  cov %5s  ft %6s  corpus %5s  rss %5s MB" \
    "$fuzz" "$seconds" "$(stat number_of_executed_units)" "$(stat average_exec_per_sec)" \
    "$cov" "$ft" "$corp" "$(stat peak_rss_mb)")"
  if ((status != 0)); then
    found=1
    line="$line  FOUND: $(ls "$out"/findings/"$fuzz"-* 2>/dev/null | head -n 1)"
    grep -E "ERROR|SUMMARY|Check failed|runtime error|terminate called" "$log" | head -n 8 >&2 || true
  fi
  echo "fuzz: $line"
  summary+=("$line")
done

echo "fuzz: ${#targets[@]} targets, ${seconds}s each"
for line in "${summary[@]}"; do echo "  $line"; done
if ((found)); then
  echo "fuzz: findings and logs are in $out; copy each finding into its target's" \
    "testdata/fuzz/<target>/ and fix the code" >&2
  exit 1
fi
if ((keep)); then echo "fuzz: corpora and logs in $out"; else rm -rf "$out"; fi
