#include "lib/base/event_loop.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace nfsrdma {
namespace {

using namespace std::chrono_literals;

// A pipe whose read end a part watches.
struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    r = fds[0];
    w = fds[1];
  }
  ~Pipe() {
    ::close(r);
    ::close(w);
  }
  void poke() const { ASSERT_EQ(::write(w, "x", 1), 1); }
  void drain() const {
    char buf[64];
    while (::read(r, buf, sizeof buf) > 0) {
    }
  }
};

// A part that records what the loop gives it; `busy` rounds say work is left.
class TestPart final : public LoopPart {
 public:
  explicit TestPart(EventLoop& loop) : loop_(loop) {}
  bool turn(std::int64_t) override {
    turns.fetch_add(1);
    if (busy.load() > 0) {
      busy.fetch_sub(1);
      return true;
    }
    return false;
  }
  void on_event(std::uint64_t key, std::uint32_t) override {
    std::lock_guard lk(mu);
    keys.push_back(key);
    for (auto* p : pipes) p->drain();
  }
  bool arm() override { return !unarmed.load(); }
  int sleep_ms() const override { return 1000; }
  bool finished() override { return done.load(); }
  void retired() override { retirements.fetch_add(1); }

  std::vector<std::uint64_t> seen() {
    std::lock_guard lk(mu);
    return keys;
  }
  void watch(const Pipe& p, std::uint64_t key) {
    pipes.push_back(&p);
    ASSERT_TRUE(loop_.watch(*this, p.r, EPOLLIN, key));
  }

  std::atomic<int> turns{0}, busy{0}, retirements{0};
  std::atomic<bool> done{false};
  std::atomic<bool> unarmed{false};  // work keeps coming as the loop would sleep (a TCP part's resumes)

 private:
  EventLoop& loop_;
  std::mutex mu;
  std::vector<std::uint64_t> keys;
  std::vector<const Pipe*> pipes;
};

template <class F>
bool eventually(F f) {
  for (int i = 0; i < 500; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(EventLoop, EachEventGoesToThePartThatWatchedItWithItsKey) {
  EventLoop loop("test-loop");
  TestPart a(loop), b(loop);
  loop.attach(a);
  loop.start();
  loop.attach(b);  // after start: from the loop's next round
  Pipe pa, pb;
  a.watch(pa, 7);
  b.watch(pb, std::uint64_t{1} << 40);  // a pointer-sized key
  pa.poke();
  ASSERT_TRUE(eventually([&] { return a.seen().size() == 1; }));
  pb.poke();
  ASSERT_TRUE(eventually([&] { return b.seen().size() == 1; }));
  EXPECT_EQ(a.seen(), std::vector<std::uint64_t>{7});
  EXPECT_EQ(b.seen(), std::vector<std::uint64_t>{std::uint64_t{1} << 40});
  a.done = b.done = true;
  loop.waker().wake_now();
  loop.stop();
  loop.join();
}

// While one part has work left, the loop does not sleep, and still looks at
// the other part's descriptors each round.
TEST(EventLoop, ABusyPartDoesNotHoldUpAnothersEvents) {
  EventLoop loop("test-loop");
  TestPart busy(loop), idle(loop);
  loop.attach(busy);
  loop.attach(idle);
  busy.busy = 1'000'000'000;
  loop.start();
  Pipe p;
  idle.watch(p, 3);
  p.poke();
  EXPECT_TRUE(eventually([&] { return idle.seen().size() == 1; })) << "the busy part's rounds hid the event";
  busy.busy = 0;
  busy.done = idle.done = true;
  loop.stop();
  loop.join();
}

// A part whose work comes back each time the loop would sleep (a TCP
// connection with more records than one turn reads posts itself again) does
// not keep another part's events waiting either.
TEST(EventLoop, APartThatNeverLetsTheLoopSleepDoesNotHoldUpAnothersEvents) {
  EventLoop loop("test-loop");
  TestPart resuming(loop), idle(loop);
  loop.attach(resuming);
  loop.attach(idle);
  resuming.unarmed = true;
  loop.start();
  Pipe p;
  idle.watch(p, 5);
  p.poke();
  EXPECT_TRUE(eventually([&] { return idle.seen().size() == 1; })) << "the loop never looked at its descriptors";
  resuming.unarmed = false;
  resuming.done = idle.done = true;
  loop.stop();
  loop.join();
}

// A finished part is retired once and turned no more, while the loop goes on
// for the others; stop() ends the loop only once every part finished.
TEST(EventLoop, AFinishedPartIsRetiredOnceAndTheLoopEndsWhenAllAre) {
  EventLoop loop("test-loop");
  TestPart first(loop), second(loop);
  loop.attach(first);
  loop.attach(second);
  loop.start();
  first.done = true;
  loop.waker().wake_now();
  ASSERT_TRUE(eventually([&] { return first.retirements.load() == 1; }));
  const int turns = first.turns.load();
  loop.stop();
  std::this_thread::sleep_for(100ms);
  loop.waker().wake_now();
  std::this_thread::sleep_for(50ms);
  EXPECT_GT(second.turns.load(), 1) << "the loop still turns the part not finished";
  EXPECT_EQ(first.turns.load(), turns) << "a retired part is not turned";
  second.done = true;
  loop.join();  // returns: every part finished
  EXPECT_EQ(first.retirements.load(), 1);
  EXPECT_EQ(second.retirements.load(), 1);
}

// A transport waits until every part it put on the loops is retired.
TEST(RetiredParts, AWaiterReturnsOnlyOnceEveryPartIsRetired) {
  RetiredParts retired;
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    retired.wait_for(2);
    returned = true;
  });
  retired.one();
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(returned.load()) << "one of two parts is retired";
  retired.one();
  waiter.join();
  EXPECT_TRUE(returned.load());
}

TEST(EventLoop, MakeNamesTheLoopsAndDefaultsToOnePerCore) {
  auto loops = EventLoop::make(3, "x");
  EXPECT_EQ(loops.size(), 3u);
  EXPECT_EQ(EventLoop::make(0, "x").size(), std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace nfsrdma
