// Fuzzes the authorization layer (issue 30): who a certificate subject makes a caller
// (PeerFromSubject), what RequireJobAccess lets them do to a job, and the names a request may
// give the ps's checkpoint store (job ids, manifests). Properties that hold for every input:
//  - a refusal is PERMISSION_DENIED or UNAUTHENTICATED, never another code or a crash;
//  - a user is let at another user's job only as an admin, and never to train it (kData);
//    a task never manages a job; a certificate of another organization and a caller without
//    the token are refused everything;
//  - a job id or manifest the store accepts names a directory inside its root: no separator,
//    no leading '.', and the job directory is exactly root/id.
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_store.h"
#include "common/security/peer_identity.h"
#include "common/testing/fuzz_target.h"

namespace ps {

std::vector<std::string> FuzzSeeds() {
  return {
      FrameMessage("CN=alice,O=admin") + FrameMessage("alice") + FrameMessage("job-1") +
          std::string("\x00\x00", 2) + FrameMessage("run-1") + FrameMessage("run-1-000001"),
      FrameMessage("CN=bob,O=admin") + FrameMessage("alice") + FrameMessage("../etc") +
          std::string("\x01\x01", 2) + FrameMessage("r") + FrameMessage("~"),
      FrameMessage("O=task, CN=10.0.0.3") + FrameMessage("") + FrameMessage(".hidden") +
          std::string("\x02\x00", 2) + FrameMessage("a/b") + FrameMessage("a/b-000002"),
      FrameMessage("CN=x,O=guests") + FrameMessage("x") + FrameMessage("j") +
          std::string("\x03\x02", 2) + FrameMessage("") + FrameMessage(""),
  };
}

}  // namespace ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::FuzzReader reader(data, size);
  const std::string subject(reader.Message()), owner(reader.Message()),
      job_id(reader.Message());
  const uint8_t choice = reader.Byte(), flags = reader.Byte();
  const std::string run_id(reader.Message()), name(reader.Message());

  ps::Peer peer = ps::PeerFromSubject(subject);
  if (flags & 1) peer.admin = true;
  if (flags & 2) peer = ps::Peer{ps::Peer::Role::kNoToken, "", false};
  const ps::JobAccess access = static_cast<ps::JobAccess>(choice % 3);
  const absl::Status status = ps::RequireJobAccess(peer, owner, job_id, access, "Call");
  if (!status.ok()) {
    CHECK(absl::IsPermissionDenied(status) || absl::IsUnauthenticated(status)) << status;
  }
  switch (peer.role) {
    case ps::Peer::Role::kUser:
      if (status.ok() && !owner.empty() && owner != peer.name) {
        CHECK(peer.admin && access != ps::JobAccess::kData) << peer.Describe() << " on " << owner;
      }
      if (owner == peer.name) CHECK(status.ok()) << status;
      break;
    case ps::Peer::Role::kTask:
      CHECK_EQ(status.ok(), access != ps::JobAccess::kManage) << status;
      break;
    case ps::Peer::Role::kOther:
    case ps::Peer::Role::kNoToken:
      CHECK(!status.ok());
      break;
    case ps::Peer::Role::kUnauthenticated:
      CHECK(status.ok()) << status;
      break;
  }

  const ps::CheckpointStore store(nullptr, "/root-of-the-store");
  absl::StatusOr<std::string> dir = store.JobDirectory(job_id);
  if (dir.ok()) {
    CHECK_EQ(*dir, "/root-of-the-store/" + job_id);
    CHECK(!job_id.empty() && job_id[0] != '.' && !absl::StrContains(job_id, '/') &&
          !absl::StrContains(job_id, '\0'))
        << job_id;
  } else {
    CHECK(absl::IsInvalidArgument(dir.status())) << dir.status();
  }
  ps::CheckpointManifest manifest;
  manifest.set_job_id(job_id);
  manifest.set_run_id(run_id);
  manifest.set_seq(choice);
  manifest.set_name(name);
  const absl::Status named = ps::CheckpointStore::CheckManifestName(manifest);
  if (named.ok()) {
    CHECK(!name.empty() && name[0] != '.' && !absl::StrContains(name, '/') &&
          !absl::StrContains(name, '\0'))
        << name;
    CHECK_EQ(name, ps::CheckpointStore::CheckpointName(run_id, choice));
  } else {
    CHECK(absl::IsInvalidArgument(named)) << named;
  }
  return 0;
}
