// Whether an event loop polls its RPC-RDMA connections through an idle
// spell (progress_loop.cpp), as a rule with no clock and no threads, so that a test can drive it.
//
// Polling pays only when the next call comes while the loop polls; when it
// comes later the poller only took a core from the threads making that call
// (a client and its application on the same few cores: an nfsrdma-fuse
// mount's calls come 100-200 us apart, and a fixed 50 us window made each
// take 1.5x as long). So a loop polls through its idle spells while most end
// in work (a miss counts twice a hit, as KVM's halt polling shrinks faster
// than it grows), and once they do not, through one spell in kProbeEvery, to
// see whether they would now. A spell that begins with a call in progress
// (its reply's Send not yet complete, as on verbs just after the reply goes
// out) waits for the server's own work: it is polled through always, and
// not scored. (A loop with a call at a worker does not ask: it sleeps until
// the worker's reply wakes it, ProgressLoop::spell.)
#pragma once

#include <algorithm>

namespace nfsrdma::rdma {

class PollScore {
 public:
  static constexpr unsigned kProbeEvery = 32;
  static constexpr int kMaxScore = 8;

  // The loop turned idle; true: it polls through this spell.
  bool begin(bool call_in_progress) {
    scored_ = !call_in_progress;
    return !scored_ || score_ > 0 || ++spells_ % kProbeEvery == 0;
  }
  // A spell it polled through ended, in work or not; false: count it in no
  // metric (it was not scored).
  bool end(bool found_work) {
    if (!scored_) return false;
    score_ = found_work ? std::min(score_ + 1, kMaxScore) : std::max(score_ - 2, 0);
    return true;
  }

 private:
  bool scored_ = false;
  int score_ = 0;  // > 0: polling has been paying
  unsigned spells_ = 0;
};

}  // namespace nfsrdma::rdma
