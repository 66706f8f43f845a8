#include "ctl/job/ps_recovery.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint_store.h"

namespace ps {
namespace {

// Probes the cluster afresh every 500 ms until every ps answers or `deadline`. Returns the last
// probe's lost shard (nullopt: every ps holds the job), or why no client could be made.
absl::StatusOr<std::optional<LostShard>> WaitForEveryPs(const RecoveryEnvironment& env,
                                                        const JobSpec& spec, absl::Time deadline,
                                                        std::unique_ptr<ClusterClient>* client) {
  std::optional<LostShard> lost;
  while (true) {
    absl::StatusOr<std::unique_ptr<ClusterClient>> fresh = env.connect();
    if (!fresh.ok()) return fresh.status();
    *client = *std::move(fresh);
    lost = FindLostShard(**client, spec.job_id(), spec.replicas() > 1);
    if (!lost.has_value() || !lost->down || env.clock->Now() >= deadline) break;
    env.clock->SleepFor(absl::Milliseconds(500));
  }
  return lost;
}

// The line that says where a recovered run goes on, and how long each part took.
std::string RecoveredLine(const JobSpec& spec, const CheckpointManifest& restored, bool start_over,
                          const std::vector<int64_t>& resume_steps, int64_t steps_lost,
                          absl::Duration until_up, absl::Duration restoring,
                          absl::Duration starting, int attempt) {
  auto seconds = [](absl::Duration d) {
    return absl::StrFormat("%.2fs", absl::ToDoubleSeconds(d));
  };
  return absl::StrCat(
      "recovered: the job goes on from ",
      start_over ? "the start (no checkpoint of this run yet)"
                 : absl::StrCat("checkpoint ", restored.name()),
      " at step ", restored.resume_step(),
      std::all_of(resume_steps.begin(), resume_steps.end(),
                  [&restored](int64_t step) { return step == restored.resume_step(); })
          ? ""
          : absl::StrCat(" (each worker at its own: ", absl::StrJoin(resume_steps, ", "), ")"),
      " as run ", spec.run_id(), " (", steps_lost, " steps done again; every ps up after ",
      seconds(until_up), ", restored in ", seconds(restoring), ", workers started in ",
      seconds(starting), attempt > 1 ? absl::StrCat(", attempt ", attempt) : "", ")");
}

}  // namespace

namespace {

// FindLostShard for a job without replicas, from each ps's ListJobs answer.
std::optional<LostShard> FindLostUnreplicatedShard(
    const std::string& job_id, const std::vector<absl::StatusOr<ListJobsResponse>>& answers) {
  const int n = static_cast<int>(answers.size());
  std::vector<const ListJobsResponse*> listed;
  bool any_holds = false;
  for (const absl::StatusOr<ListJobsResponse>& answer : answers) {
    listed.push_back(answer.ok() ? &*answer : nullptr);
    if (!answer.ok()) continue;
    any_holds = any_holds ||
                std::find(answer->job_ids().begin(), answer->job_ids().end(), job_id) !=
                    answer->job_ids().end() ||
                std::any_of(answer->copies().begin(), answer->copies().end(),
                            [&](const ListJobsResponse::ShardCopy& c) { return c.job_id() == job_id; });
  }
  auto down = [&](int ps) {
    return LostShard{ps, true,
                     absl::StrCat("ps:", ps, " is down (",
                                  ClusterClient::Detail(answers[ps].status()), ")")};
  };
  // Each shard is served where it moved (MoveShard), or by its own ps; a ps that is down loses
  // nothing where every shard it served moved away before (a ps removed from the job).
  const std::map<int, int> moved = MovedShardsIn(job_id, listed);
  std::optional<LostShard> without_job;
  for (int shard = 0; shard < n; ++shard) {
    if (moved.count(shard) > 0) continue;
    const ListJobsResponse* own = listed[shard];
    if (own == nullptr) return down(shard);
    // Its records of moves, from its own ps on a hop at a time: where it went last.
    int at = shard;
    for (int hop = 0; hop < n; ++hop) {
      const ListJobsResponse* here = listed[at];
      auto record = std::find_if(here->moved().begin(), here->moved().end(),
                                 [&](const ListJobsResponse::MovedShard& m) {
                                   return m.job_id() == job_id && m.shard() == shard;
                                 });
      if (record == here->moved().end() || record->to_ps() < 0 || record->to_ps() >= n ||
          record->to_ps() == at) {
        break;
      }
      if (listed[record->to_ps()] == nullptr) return down(record->to_ps());
      at = record->to_ps();
    }
    if (without_job.has_value()) continue;
    if (at != shard) {
      without_job = LostShard{at, false,
                              absl::StrCat("ps:", at, " no longer holds shard ", shard,
                                           ", which moved there (it was started again)")};
    } else if (std::find(own->job_ids().begin(), own->job_ids().end(), job_id) ==
               own->job_ids().end()) {
      without_job = LostShard{
          shard, false, absl::StrCat("ps:", shard, " no longer holds the job (it was started again)")};
    }
  }
  return any_holds ? without_job : std::nullopt;
}

}  // namespace

std::optional<LostShard> FindLostShard(const ClusterClient& client, const std::string& job_id,
                                       bool replicated) {
  const int n = client.num_ps();
  if (!replicated) {
    return FindLostUnreplicatedShard(job_id, client.ListEveryPs());
  }
  std::optional<LostShard> down;
  bool any_holds = false;
  std::vector<bool> held(n, false);  // Some ps holds a copy of the shard.
  for (int ps = 0; ps < n; ++ps) {
    absl::StatusOr<ListJobsResponse> jobs = client.ListJobs(ps);
    if (!jobs.ok()) {
      down = LostShard{
          ps, true,
          absl::StrCat("ps:", ps, " is down (", ClusterClient::Detail(jobs.status()), ")")};
      continue;
    }
    if (std::find(jobs->job_ids().begin(), jobs->job_ids().end(), job_id) !=
        jobs->job_ids().end()) {
      any_holds = true;
      held[ps] = true;
    }
    for (const ListJobsResponse::ShardCopy& copy : jobs->copies()) {
      if (copy.job_id() != job_id || copy.shard() < 0 || copy.shard() >= n) continue;
      any_holds = true;
      held[copy.shard()] = true;
    }
  }
  if (!down.has_value() && !any_holds) return std::nullopt;
  // A replicated job loses a shard only with both its copies: a ps that is down or was started
  // again loses nothing while the next ps holds its shard's copy (a worker's call makes that copy
  // serve it). A shard of a ps that is down may be held there still: `down` says so, and a
  // recovery waits for every ps before it looks again.
  for (int shard = 0; shard < n; ++shard) {
    if (held[shard]) continue;
    const int next = (shard + 1) % n;
    return LostShard{shard, down.has_value(),
                     absl::StrCat("shard ", shard, " lost both its copies: neither ps:", shard,
                                  " nor ps:", next, " holds it",
                                  down.has_value() ? absl::StrCat(" (", down->why, ")") : "")};
  }
  return std::nullopt;
}

std::optional<Recovery> RecoveryNeeded(const ClusterClient& client, const std::string& job_id,
                                       const std::vector<JobProgress>& workers, bool replicated,
                                       const std::set<int>& not_started) {
  const bool failed =
      std::any_of(workers.begin(), workers.end(), [&not_started](const JobProgress& p) {
        return p.state() == JobProgress::FAILED && not_started.count(p.worker()) == 0;
      });
  if (!failed) return std::nullopt;
  std::optional<LostShard> lost = FindLostShard(client, job_id, replicated);
  if (!lost.has_value()) return std::nullopt;
  Recovery recovery{*std::move(lost), {}};
  for (const JobProgress& worker : workers) {
    recovery.worker_steps.push_back(worker.step());
  }
  return recovery;
}

absl::StatusOr<int64_t> RecoverRun(const RecoveryEnvironment& env, const Recovery& recovery,
                                   std::unique_ptr<ClusterClient>* client, JobSpec* spec,
                                   RestorableCheckpoints* restorable) {
  std::ostream& out = *env.out;
  const std::string task = absl::StrCat("ps:", recovery.shard.ps);
  out << (env.live_line ? "\n" : "") << recovery.shard.why << " at step "
      << recovery.furthest_step() << ": recovering the job from its latest complete checkpoint\n";
  env.results->RecordEvent(
      {"recovering", task, recovery.furthest_step(), "", -1, recovery.shard.why});
  const absl::Time start = env.clock->Now(), deadline = start + kRecoveryDeadline;
  absl::Status last;
  for (int attempt = 1;; ++attempt) {
    if (attempt > 1) {
      out << "recovery attempt " << attempt - 1 << " failed (" << last.message()
          << "); trying again\n";
      env.clock->SleepFor(absl::Milliseconds(500));
    }
    absl::StatusOr<std::optional<LostShard>> down =
        WaitForEveryPs(env, *spec, deadline, client);
    if (!down.ok()) return down.status();
    if (env.clock->Now() >= deadline) {
      env.stop_everywhere(spec->job_id());
      return absl::UnavailableError(absl::StrCat(
          down->has_value() ? (*down)->why : std::string(last.message()),
          ": the job could not be recovered within ", absl::FormatDuration(kRecoveryDeadline),
          " and was stopped (start every ps again, then submit the job with --resume)"));
    }
    const absl::Time up = env.clock->Now();
    env.stop_everywhere(spec->job_id());
    spec->set_run_id(env.new_run_id());
    restorable->run_ids.insert(spec->run_id());
    absl::StatusOr<CheckpointManifest> restored =
        RestoreLatestCheckpoint(**client, *spec, *restorable, out);
    if (!restored.ok() && absl::IsUnavailable(restored.status())) {
      last = restored.status();
      continue;
    }
    // No checkpoint of its own yet: the run starts over from step 0 (as a fresh submission of
    // it would), never from another run's state.
    const bool start_over = absl::IsNotFound(restored.status());
    if (start_over) {
      out << restored.status().message() << ": the job starts over from step 0\n";
      restored = CheckpointManifest();
    }
    if (!restored.ok()) return restored.status();
    const absl::Time restored_at = env.clock->Now();
    const std::vector<int64_t> resume_steps =
        WorkerResumeSteps(*restored, (*client)->num_workers());
    absl::Status started = env.start_workers(**client, *spec, resume_steps);
    if (absl::IsUnavailable(started)) {
      last = started;
      continue;
    }
    if (!started.ok()) return started;
    // The most steps a worker does again.
    int64_t steps_lost = 0;
    for (size_t w = 0; w < resume_steps.size() && w < recovery.worker_steps.size(); ++w) {
      steps_lost = std::max(steps_lost, recovery.worker_steps[w] - resume_steps[w]);
    }
    const std::string line =
        RecoveredLine(*spec, *restored, start_over, resume_steps, steps_lost, up - start,
                      restored_at - up, env.clock->Now() - restored_at, attempt);
    out << line << "\n";
    env.results->RecordEvent(
        {"recovered", task, restored->resume_step(), restored->name(), steps_lost, line});
    return restored->resume_step();
  }
}

}  // namespace ps
