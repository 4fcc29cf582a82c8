// Calls run on a transport's own thread (Dispatcher::handle_inline): which
// READs, WRITEs, GETATTRs, ACCESSes, LOOKUPs and changes run there and which
// are passed to a worker untouched, to run there.
// Needs root (file handles); skips otherwise.
#include <fcntl.h>
#include <stdlib.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "lib/base/log.hpp"
#include "lib/base/metrics.hpp"
#include "lib/rpc/rpc.hpp"
#include "server/dispatcher.hpp"

namespace nfsrdma::server {
namespace {

using namespace nfs3;

class Channel final : public rpc::ReplyChannel {
 public:
  Channel() {
    auto* a = reinterpret_cast<sockaddr_in*>(&peer_.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(800);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    peer_.len = sizeof *a;
  }
  // A piped payload is read back into place, as a TCP client receives it.
  void send(rpc::ReplyMessage&& reply) override {
    ++sent;
    bytes = std::move(reply.bytes);
    piped = static_cast<bool>(reply.pipe);
    if (!piped) return;
    const std::size_t at = bytes.size(), held = reply.pipe.held();
    bytes.resize(at + xdr::pad4(held));
    std::size_t got = 0;
    while (got < held) {
      ssize_t n = ::read(reply.pipe.read_end(), bytes.data() + at + got, held - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    reply.pipe.drained(got);
    EXPECT_EQ(got, held);
  }
  void drop() override { ++dropped; }
  void close() override {}
  const rpc::Peer& peer() const override { return peer_; }
  int sent = 0, dropped = 0;
  bool piped = false;
  std::vector<std::uint8_t> bytes;

 private:
  rpc::Peer peer_;
};

class Inline : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (file handles)";
    std::string tmpl = (base_ / "nfsrdma-inline-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/file") << std::string(3 * 4096, 'x');
    std::filesystem::create_directory(dir_ + "/sub");
    auto e = parse_export_line(dir_ + " 127.0.0.1(rw,insecure," + sync_ + ",no_root_squash)");
    ASSERT_TRUE(e && table_.replace({*e}));
    nfs_ = std::make_unique<NfsService>(table_, NfsLimits{1 << 20, 1 << 20}, verf8{});
    mount_ = std::make_unique<MountService>(table_);
    dispatcher_ = std::make_unique<Dispatcher>(*nfs_, *mount_, nullptr, drc_);
    diropargs3 l{table_.all()[0]->root_fh, "file"};
    auto found = run<LOOKUP3res>(Proc::LOOKUP, l);
    ASSERT_EQ(found.status, NFS3_OK);
    file_ = found.object;  // and the worker's LOOKUP kept the export's root open
    sub_ = run<LOOKUP3res>(Proc::LOOKUP, diropargs3{table_.all()[0]->root_fh, "sub"}).object;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  template <class Args>
  std::vector<std::uint8_t> encode(Proc proc, const Args& args) {
    std::vector<std::uint8_t> m;
    xdr::Encoder e(m);
    rpc::AuthSys root;
    root.machinename = "test";
    xid_ = rpc::next_xid();
    rpc::encode_call_header(e, xid_, kProgram, kVersion, static_cast<std::uint32_t>(proc), root);
    codec(e, const_cast<Args&>(args));
    return m;
  }
  template <class Res>
  Res decode(const std::vector<std::uint8_t>& bytes) {
    xdr::Decoder d(bytes);
    Res res{};
    EXPECT_TRUE(rpc::check_reply(d, xid_).ok());
    codec(d, res);
    return res;
  }
  // On a worker.
  template <class Res, class Args>
  Res run(Proc proc, const Args& args) {
    auto m = encode(proc, args);
    auto ch = std::make_shared<Channel>();
    dispatcher_->handle(call(m, ch));
    EXPECT_EQ(ch->sent, 1);
    return decode<Res>(ch->bytes);
  }
  rpc::IncomingCall call(const std::vector<std::uint8_t>& m, std::shared_ptr<Channel> ch) {
    rpc::IncomingCall c;
    c.message = xdr::Parts{m};
    c.channel = std::move(ch);
    c.listener = kNfsListener;
    c.secure = true;
    return c;
  }
  // Tried inline: whether it ran there, else passed on (and then run on a
  // worker, as the transport would); and the reply.
  template <class Res, class Args>
  std::pair<bool, Res> try_inline(Proc proc, const Args& args) {
    auto m = encode(proc, args);
    auto ch = std::make_shared<Channel>();
    rpc::IncomingCall c = call(m, ch);
    bool ran = dispatcher_->handle_inline(c);
    if (!ran) {
      EXPECT_EQ(ch->sent + ch->dropped, 0) << "passed on, yet answered";
      dispatcher_->handle(std::move(c));
    }
    EXPECT_EQ(ch->sent, 1);
    return {ran, decode<Res>(ch->bytes)};
  }
  struct Read {
    bool ran = false;
    bool piped = false;
    nfsstat3 status = NFS3_OK;
    bool eof = false;
    std::string data;
  };
  Read try_read(std::uint64_t offset, std::uint32_t count) {
    auto m = encode(Proc::READ, READ3args{file_, offset, count});
    auto ch = std::make_shared<Channel>();
    rpc::IncomingCall c = call(m, ch);
    c.pipes = pipes_;
    Read r;
    r.ran = dispatcher_->handle_inline(c);
    if (!r.ran) dispatcher_->handle(std::move(c));
    EXPECT_EQ(ch->sent, 1);
    auto res = decode<READ3res>(ch->bytes);
    r.status = res.status;
    r.piped = ch->piped;
    r.eof = res.eof;
    r.data.assign(res.data.begin(), res.data.end());
    return r;
  }
  bool try_write(std::uint64_t offset, std::size_t len, stable_how stable = stable_how::UNSTABLE) {
    data_.assign(len, 'w');
    WRITE3args a{file_, offset, static_cast<std::uint32_t>(len), stable, data_};
    auto [ran, res] = try_inline<WRITE3res>(Proc::WRITE, a);
    EXPECT_EQ(res.status, NFS3_OK);
    return ran;
  }
  // Drops the file's pages from the page cache, once clean.
  // DONTNEED skips pages still under writeback or locked by a reader, so it
  // is asked again until mincore shows every page out (a CI run found one
  // left behind), for half a second at most.
  void evict() {
    int fd = ::open((dir_ + "/file").c_str(), O_RDONLY);
    EXPECT_EQ(::fsync(fd), 0);
    const auto pages = static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END) + 4095) / 4096;
    for (int tries = 0; tries < 50; ++tries) {
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      bool any = false;
      for (std::uint64_t p = 0; p < pages && !any; ++p) any = page_cached(p * 4096);
      if (!any) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::close(fd);
  }
  // Asked with mincore, which starts no I/O: a missed preadv2(RWF_NOWAIT)
  // starts readahead, and the page could be back before the server asks.
  bool page_cached(std::uint64_t at) {
    int fd = ::open((dir_ + "/file").c_str(), O_RDONLY);
    const std::size_t len = static_cast<std::size_t>(::lseek(fd, 0, SEEK_END));
    void* map = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    EXPECT_NE(map, MAP_FAILED);
    std::vector<unsigned char> resident((len + 4095) / 4096);
    EXPECT_EQ(::mincore(map, len, resident.data()), 0);
    ::munmap(map, len);
    return resident.at(at / 4096) & 1;
  }

  std::string sync_ = "sync";  // the export's sync or async
  std::filesystem::path base_ = std::filesystem::temp_directory_path();
  PipePool* pipes_ = nullptr;  // lent to try_read's calls, as TCP does
  std::string dir_;
  ExportTable table_{SipKey{}};
  DuplicateRequestCache drc_{256};
  std::unique_ptr<NfsService> nfs_;
  std::unique_ptr<MountService> mount_;
  std::unique_ptr<Dispatcher> dispatcher_;
  nfs_fh3 file_, sub_;
  std::uint32_t xid_ = 0;
  std::vector<std::uint8_t> data_;
};

TEST_F(Inline, SmallUnstableWritesToAnOpenFileRunInline) {
  ASSERT_FALSE(try_write(0, 4096));  // the worker opens the file
  EXPECT_TRUE(try_write(4096, 4096));
  EXPECT_TRUE(try_write(3 * 4096, 64 * 1024));  // past the end: pages with nothing to read
  std::ifstream f(dir_ + "/file", std::ios::binary);
  std::string on_disk((std::istreambuf_iterator<char>(f)), {});
  ASSERT_EQ(on_disk.size(), 3 * 4096 + 64 * 1024u);
  EXPECT_EQ(on_disk.substr(4096, 4096), std::string(4096, 'w'));
  EXPECT_EQ(on_disk.substr(2 * 4096, 4096), std::string(4096, 'x'));
}

TEST_F(Inline, ReadsOfAFileKeptOpenRunInline) {
  EXPECT_FALSE(try_read(0, 4096).ran) << "the worker opens the file";
  Read r = try_read(4096, 3 * 4096);
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.status, NFS3_OK);
  EXPECT_TRUE(r.eof);
  EXPECT_EQ(r.data, std::string(2 * 4096, 'x'));
}

// Over a transport that sends pipes (TCP), a READ of 64 KiB or more is
// spliced from the page cache into one, uncopied, on a worker: splicing may
// wait for the disk. Less goes as before.
TEST_F(Inline, LargeReadsGoByPipeFromAWorker) {
  if (table_.all()[0]->in_memory) {
    GTEST_SKIP() << "the temporary directory is in memory: its READs run inline (InlineOnTmpfs)";
  }
  PipePool pool(4, 1 << 20);
  pipes_ = &pool;
  std::string content(256 * 1024, 0);
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>('a' + i % 23);
  std::ofstream(dir_ + "/file", std::ios::trunc) << content;
  EXPECT_FALSE(try_read(0, 4096).ran) << "the worker opens the file";
  Read small = try_read(4096, 4096);
  EXPECT_TRUE(small.ran);
  EXPECT_FALSE(small.piped);
  Read big = try_read(4096 + 3, 128 * 1024);
  EXPECT_FALSE(big.ran) << "a splice may wait for the disk";
  EXPECT_TRUE(big.piped);
  EXPECT_FALSE(big.eof);
  EXPECT_EQ(big.data, content.substr(4096 + 3, 128 * 1024));
  Read tail = try_read(180 * 1024 + 1, 128 * 1024);
  EXPECT_TRUE(tail.piped);
  EXPECT_TRUE(tail.eof);
  EXPECT_EQ(tail.data, content.substr(180 * 1024 + 1)) << "short at the end of the file, padded";
  Read last = try_read(250 * 1024, 128 * 1024);
  EXPECT_TRUE(last.ran && !last.piped) << "6 KiB left in the file: copied, inline";
  EXPECT_EQ(last.data, content.substr(250 * 1024));
  EXPECT_EQ(pool.lent(), 0u);
}

// tmpfs refuses RWF_NOWAIT (before Linux 6.6), and its pages are memory:
// its files are read, and written in part pages or with a flush (which
// does nothing there), inline as they are.
class InlineOnTmpfs : public Inline {
 protected:
  void SetUp() override {
    struct statfs fs {};
    if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC) GTEST_SKIP() << "no tmpfs at /dev/shm";
    base_ = "/dev/shm";
    Inline::SetUp();
  }
};

TEST_F(InlineOnTmpfs, ReadsAndPartPageWritesOfAFileKeptOpenRunInline) {
  EXPECT_FALSE(try_read(0, 4096).ran) << "the worker opens the file";
  Read r = try_read(100, 4096);
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.data, std::string(4096, 'x'));
  EXPECT_FALSE(r.eof);
  EXPECT_TRUE(try_write(0, 4096)) << "opened for writing from the reader's O_PATH descriptor, where it arrived";
  EXPECT_TRUE(try_write(2 * 4096 + 100, 100)) << "a part page";
  EXPECT_TRUE(try_write(4096, 4096, stable_how::FILE_SYNC)) << "a flush of memory waits for nothing";
  r = try_read(2 * 4096, 4096);
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.data, std::string(100, 'x') + std::string(100, 'w') + std::string(4096 - 200, 'x'));
  std::ofstream(dir_ + "/file", std::ios::app) << std::string(128 * 1024, 'y');
  PipePool pool(1, 1 << 20);
  pipes_ = &pool;
  r = try_read(3 * 4096, 128 * 1024);
  EXPECT_TRUE(r.ran && r.piped) << "spliced on the transport's thread: memory waits for no disk";
  EXPECT_EQ(r.data, std::string(128 * 1024, 'y'));
  pipes_ = nullptr;
}

TEST_F(Inline, WritesThatWaitForTheDiskGoToAWorker) {
  if (table_.all()[0]->in_memory) GTEST_SKIP() << "the temporary directory is in memory (InlineOnTmpfs)";
  ASSERT_FALSE(try_write(0, 4096));
  EXPECT_FALSE(try_write(4096, 4096, stable_how::FILE_SYNC)) << "a flush on a sync export";
  EXPECT_FALSE(try_write(4096, 4096, stable_how::DATA_SYNC));
  EXPECT_FALSE(try_write(0, 64 * 1024 + 4096)) << "over the inline size";
  EXPECT_TRUE(try_write(4096, 4096, stable_how::UNSTABLE));
}

TEST_F(Inline, AWriteOverTheInlineSizeIsPassedOnBeforeItsFileIsLookedUp) {
  ASSERT_FALSE(try_write(0, 4096));
  metrics::Counter& hits = metrics::registry().counter(
      "nfsrdma_server_open_file_lookups_total",
      "READ, WRITE, COMMIT and LOOKUP calls by whether their file or directory was open", {{"result", "hit"}});
  data_.assign(64 * 1024 + 4096, 'w');
  WRITE3args a{file_, 0, static_cast<std::uint32_t>(data_.size()), stable_how::UNSTABLE, data_};
  auto m = encode(Proc::WRITE, a);
  auto ch = std::make_shared<Channel>();
  rpc::IncomingCall c = call(m, ch);
  const std::uint64_t before = hits.value();
  EXPECT_FALSE(dispatcher_->handle_inline(c));
  EXPECT_EQ(hits.value(), before) << "the transport's thread looked the file up for a WRITE it could not run";
  dispatcher_->handle(std::move(c));
  EXPECT_EQ(decode<WRITE3res>(ch->bytes).status, NFS3_OK) << "and the worker ran it";
}

TEST_F(Inline, GetattrAndAccessRunInlineOnlyForAFileKeptOpen) {
  auto getattr = [&](const nfs_fh3& fh) {
    auto [ran, r] = try_inline<GETATTR3res>(Proc::GETATTR, FhArgs{fh});
    EXPECT_EQ(r.status, NFS3_OK);
    return std::pair{ran, r.obj_attributes.size};
  };
  EXPECT_FALSE(getattr(file_).first) << "a file not open: resolving its handle may read the disk";
  EXPECT_FALSE(getattr(sub_).first) << "a directory no LOOKUP was made in";
  EXPECT_TRUE(getattr(table_.all()[0]->root_fh).first) << "the directory LOOKUP kept open";
  ASSERT_FALSE(try_write(4096, 4096));  // the worker opens the file
  std::ofstream(dir_ + "/file", std::ios::app) << "grown";
  auto [ran, size] = getattr(file_);
  EXPECT_TRUE(ran);
  EXPECT_EQ(size, 3 * 4096u + 5) << "attributes as they are now";
  ::chmod((dir_ + "/file").c_str(), 0644);
  auto [access_ran, acc] = try_inline<ACCESS3res>(Proc::ACCESS, ACCESS3args{file_, ACCESS3_READ | ACCESS3_EXECUTE});
  EXPECT_TRUE(access_ran);
  EXPECT_EQ(acc.status, NFS3_OK);
  EXPECT_EQ(acc.access, ACCESS3_READ) << "checked now: no execute bit, so not even root may execute it";
  std::filesystem::remove(dir_ + "/file");
  EXPECT_FALSE(getattr(file_).first) << "no name left: the worker answers (stale)";
}

TEST_F(Inline, LookupRunsInlineInADirectoryKeptOpenForANameTheKernelHasCached) {
  const nfs_fh3& root = table_.all()[0]->root_fh;
  auto lookup = [&](const nfs_fh3& dir, const std::string& name) {
    return try_inline<LOOKUP3res>(Proc::LOOKUP, diropargs3{dir, name});
  };
  auto [ran, found] = lookup(root, "file");
  EXPECT_TRUE(ran) << "the root is kept open, and its entry 'file' cached";
  ASSERT_EQ(found.status, NFS3_OK);
  EXPECT_EQ(found.object, file_);
  ASSERT_TRUE(found.obj_attributes && found.dir_attributes);
  EXPECT_EQ(found.obj_attributes->size, 3 * 4096u);
  EXPECT_EQ(found.dir_attributes->type, NF3DIR);
  EXPECT_EQ(lookup(root, "..").second.object, root) << "'..' of the export's root is the root";
  if (!table_.all()[0]->in_memory) {
    EXPECT_FALSE(lookup(root, "missing").first) << "a name the kernel has not seen may need the disk";
  }
  run<LOOKUP3res>(Proc::LOOKUP, diropargs3{root, "missing"});  // now the kernel knows it is not there
  auto [missing_ran, missing] = lookup(root, "missing");
  EXPECT_TRUE(missing_ran);
  EXPECT_EQ(missing.status, NFS3ERR_NOENT);
  EXPECT_EQ(lookup(root, "a/b").second.status, NFS3ERR_ACCES);
  EXPECT_EQ(lookup(file_, "x").second.status, NFS3ERR_NOTDIR);

  std::ofstream(dir_ + "/sub/inner") << "i";
  auto [sub_ran, inner] = lookup(sub_, "inner");
  EXPECT_FALSE(sub_ran) << "'sub' was not open: resolving its handle may read the disk";
  EXPECT_EQ(inner.status, NFS3_OK);
  EXPECT_TRUE(lookup(sub_, "inner").first) << "the worker's LOOKUP kept it open";
  std::filesystem::remove_all(dir_ + "/sub");
  auto [gone_ran, gone] = lookup(sub_, "inner");
  EXPECT_FALSE(gone_ran) << "a directory removed: the worker answers";
  EXPECT_EQ(gone.status, NFS3ERR_STALE);
}

TEST_F(Inline, APartPageWriteRunsInlineOnlyWhenThePageIsCached) {
  ASSERT_FALSE(try_write(0, 4096));
  evict();
  if (page_cached(2 * 4096)) GTEST_SKIP() << "this filesystem keeps the page cached (tmpfs?)";
  // A page evicted can come back before the server asks (the kernel's own
  // readahead or writeback on a busy machine: a CI run saw it once): the
  // write must go to the worker in one of a few tries, each after an evict.
  auto to_worker = [&](std::uint64_t offset, std::uint32_t count) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      evict();
      if (!try_write(offset, count)) return true;
    }
    return false;
  };
  EXPECT_TRUE(to_worker(2 * 4096 + 100, 100)) << "the kernel would read the page first";
  EXPECT_TRUE(to_worker(4096, 4096 + 100)) << "its tail page is not cached";
  std::ifstream(dir_ + "/file").ignore(1 << 20);  // read back into the cache
  ASSERT_TRUE(page_cached(2 * 4096));
  EXPECT_TRUE(try_write(2 * 4096 + 100, 100));
  EXPECT_TRUE(try_write(4096, 4096 + 100));
}

metrics::Counter& change_commits() {
  return metrics::registry().counter(
      "nfsrdma_server_change_commits_total",
      "Directories and files a change on a sync export committed to stable storage before its reply");
}

// Changes of names and attributes on an `async` export, whose objects are
// kept open: a worker's change keeps its directory open, as a LOOKUP does.
// On tmpfs where there is one: a journal that makes a change sleep over 2 ms
// would send the rest to workers for a second.
class InlineAsync : public Inline {
 protected:
  void SetUp() override {
    sync_ = "async";
    struct statfs fs {};
    if (::statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC) base_ = "/dev/shm";
    Inline::SetUp();
  }
  std::pair<bool, CreateRes> create(const nfs_fh3& dir, const std::string& name) {
    CREATE3args a{{dir, name}, createmode3::UNCHECKED, {}, {}};
    a.obj_attributes.mode = 0644;
    return try_inline<CreateRes>(Proc::CREATE, a);
  }
  std::pair<bool, WccRes> setattr(const nfs_fh3& fh, const sattr3& attrs) {
    return try_inline<WccRes>(Proc::SETATTR, SETATTR3args{fh, attrs, {}});
  }
  bool exists(const std::string& name) { return std::filesystem::exists(dir_ + "/" + name); }
};

TEST_F(InlineAsync, ChangesRunInlineWhereWhatTheyNameIsKeptOpen) {
  const nfs_fh3& root = table_.all()[0]->root_fh;
  const std::uint64_t commits_before = change_commits().value();
  auto [ran, made] = create(root, "new");
  EXPECT_TRUE(ran) << "the root is kept open";
  ASSERT_EQ(made.status, NFS3_OK);
  ASSERT_TRUE(made.obj && made.dir_wcc.before && made.dir_wcc.after);
  EXPECT_TRUE(exists("new"));
  auto [sub_ran, a] = create(sub_, "a");
  EXPECT_FALSE(sub_ran) << "'sub' was not open: resolving its handle may read the disk";
  EXPECT_EQ(a.status, NFS3_OK);
  EXPECT_TRUE(create(sub_, "b").first) << "the worker's CREATE kept 'sub' open";
  EXPECT_EQ(create(sub_, "b").second.status, NFS3_OK) << "UNCHECKED over an existing file";

  sattr3 mode;
  mode.mode = 0600;
  auto [new_ran, new_mode] = setattr(*made.obj, mode);
  EXPECT_TRUE(new_ran) << "what a CREATE made is kept open, for the SETATTRs after it";
  EXPECT_EQ(new_mode.status, NFS3_OK);
  data_.assign(100, 'n');
  auto [write_ran, wrote] =
      try_inline<WRITE3res>(Proc::WRITE, WRITE3args{*made.obj, 0, 100, stable_how::UNSTABLE, data_});
  EXPECT_TRUE(write_ran) << "a file a CREATE made is opened for its first WRITE on the receiving thread";
  EXPECT_EQ(wrote.status, NFS3_OK);
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/new"), 100u);
  EXPECT_FALSE(setattr(file_, mode).first) << "a file not kept open";
  ASSERT_FALSE(try_write(0, 4096));  // the worker opens 'file' for writing, and keeps it
  auto [chmod_ran, chmod] = setattr(file_, mode);
  EXPECT_TRUE(chmod_ran);
  EXPECT_EQ(chmod.status, NFS3_OK);
  EXPECT_EQ(std::filesystem::status(dir_ + "/file").permissions(), std::filesystem::perms(0600));
  sattr3 size;
  size.size = 100;
  auto [truncate_ran, truncated] = setattr(file_, size);
  EXPECT_FALSE(truncate_ran) << "a truncate may free a whole file's blocks";
  EXPECT_EQ(truncated.status, NFS3_OK);
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/file"), 100u);

  auto [rename_ran, renamed] = try_inline<RENAME3res>(Proc::RENAME, RENAME3args{{root, "new"}, {sub_, "moved"}});
  EXPECT_TRUE(rename_ran);
  EXPECT_EQ(renamed.status, NFS3_OK);
  EXPECT_TRUE(!exists("new") && exists("sub/moved"));
  auto [mkdir_ran, dir] = try_inline<CreateRes>(Proc::MKDIR, MKDIR3args{{root, "d"}, {}});
  EXPECT_TRUE(mkdir_ran);
  EXPECT_EQ(dir.status, NFS3_OK);
  auto [rmdir_ran, rmdir] = try_inline<WccRes>(Proc::RMDIR, diropargs3{root, "d"});
  EXPECT_TRUE(rmdir_ran);
  EXPECT_EQ(rmdir.status, NFS3_OK);
  auto [remove_ran, removed] = try_inline<WccRes>(Proc::REMOVE, diropargs3{sub_, "moved"});
  EXPECT_TRUE(remove_ran);
  EXPECT_EQ(removed.status, NFS3_OK);
  EXPECT_FALSE(exists("sub/moved") || exists("d"));
  EXPECT_EQ(try_inline<WccRes>(Proc::REMOVE, diropargs3{sub_, "moved"}).second.status, NFS3ERR_NOENT);

  // What frees a large file's blocks is a worker's.
  std::ofstream(dir_ + "/big") << std::string(2 << 20, 'b');
  std::ofstream(dir_ + "/big2") << std::string(2 << 20, 'b');
  std::ofstream(dir_ + "/small") << "s";
  auto [over_ran, over] = try_inline<RENAME3res>(Proc::RENAME, RENAME3args{{root, "small"}, {root, "big2"}});
  EXPECT_FALSE(over_ran) << "renamed over a large file's last link";
  EXPECT_EQ(over.status, NFS3_OK);
  auto [big_ran, big] = try_inline<WccRes>(Proc::REMOVE, diropargs3{root, "big"});
  EXPECT_FALSE(big_ran) << "a large file's last link";
  EXPECT_EQ(big.status, NFS3_OK);
  EXPECT_FALSE(exists("big") || exists("small"));
  CREATE3args truncating{{root, "big2"}, createmode3::UNCHECKED, {}, {}};
  truncating.obj_attributes.size = 0;
  auto [trunc_ran, trunc] = try_inline<CreateRes>(Proc::CREATE, truncating);
  EXPECT_FALSE(trunc_ran) << "a create that truncates";
  EXPECT_EQ(trunc.status, NFS3_OK);
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/big2"), 0u);

  EXPECT_EQ(change_commits().value(), commits_before) << "an async export commits no change";

  std::filesystem::remove_all(dir_ + "/sub");
  auto [gone_ran, gone] = create(sub_, "c");
  EXPECT_FALSE(gone_ran) << "a directory removed: the worker answers";
  EXPECT_EQ(gone.status, NFS3ERR_STALE);
}

// On a `sync` export each change is committed before its reply, which waits
// for the disk: a worker's. The call's duplicate request cache entry, made
// before that was known, goes again, or the worker would find its own call
// in progress and drop it.
TEST_F(Inline, ChangesOnASyncExportAreCommittedOnAWorker) {
  if (table_.all()[0]->in_memory) GTEST_SKIP() << "the temporary directory is in memory (InlineOnTmpfs)";
  const nfs_fh3& root = table_.all()[0]->root_fh;
  const std::uint64_t before = change_commits().value();
  CREATE3args a{{root, "new"}, createmode3::UNCHECKED, {}, {}};
  auto [ran, made] = try_inline<CreateRes>(Proc::CREATE, a);
  EXPECT_FALSE(ran);
  EXPECT_EQ(made.status, NFS3_OK);
  EXPECT_EQ(change_commits().value() - before, 2u) << "the new file and its directory";
  sattr3 mode;
  mode.mode = 0600;
  ASSERT_TRUE(made.obj);
  EXPECT_EQ(try_inline<WccRes>(Proc::SETATTR, SETATTR3args{*made.obj, mode, {}}).second.status, NFS3_OK);
  EXPECT_EQ(change_commits().value() - before, 3u) << "the file";
  auto [rename_ran, renamed] = try_inline<RENAME3res>(Proc::RENAME, RENAME3args{{root, "new"}, {sub_, "new"}});
  EXPECT_FALSE(rename_ran);
  EXPECT_EQ(renamed.status, NFS3_OK);
  EXPECT_EQ(change_commits().value() - before, 5u) << "both directories";
  auto [remove_ran, removed] = try_inline<WccRes>(Proc::REMOVE, diropargs3{sub_, "new"});
  EXPECT_FALSE(remove_ran);
  EXPECT_EQ(removed.status, NFS3_OK);
  EXPECT_EQ(change_commits().value() - before, 6u) << "the directory";
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/sub/new"));
}

// tmpfs keeps every directory in memory: a name it has never been asked
// for (the LOOKUP before each create of the kernel's NFS client) is looked
// up where the call arrived, as one it has cached.
TEST_F(InlineOnTmpfs, LookupsOfNamesTheKernelHasNotSeenRunInline) {
  const nfs_fh3& root = table_.all()[0]->root_fh;
  auto [ran, missing] = try_inline<LOOKUP3res>(Proc::LOOKUP, diropargs3{root, "never-seen"});
  EXPECT_TRUE(ran);
  EXPECT_EQ(missing.status, NFS3ERR_NOENT);
  EXPECT_TRUE(missing.dir_attributes.has_value());
  std::ofstream(dir_ + "/made-here") << "m";
  auto [made_ran, made] = try_inline<LOOKUP3res>(Proc::LOOKUP, diropargs3{root, "made-here"});
  EXPECT_TRUE(made_ran);
  ASSERT_EQ(made.status, NFS3_OK);
  ASSERT_TRUE(made.obj_attributes.has_value());
  EXPECT_EQ(made.obj_attributes->size, 1u);
}

// tmpfs has no disk to commit to (its fsync writes nothing, as nfsd's
// commit_metadata does nothing there): on a `sync` export in memory a
// change commits nothing and runs inline as on an `async` one.
TEST_F(InlineOnTmpfs, ChangesOnASyncExportInMemoryRunInlineAndCommitNothing) {
  const nfs_fh3& root = table_.all()[0]->root_fh;
  const std::uint64_t before = change_commits().value();
  CREATE3args a{{root, "new"}, createmode3::UNCHECKED, {}, {}};
  auto [ran, made] = try_inline<CreateRes>(Proc::CREATE, a);
  EXPECT_TRUE(ran) << "the root is kept open";
  EXPECT_EQ(made.status, NFS3_OK);
  ASSERT_TRUE(made.obj);
  auto [read_ran, read] = try_inline<READ3res>(Proc::READ, READ3args{*made.obj, 0, 4096});
  EXPECT_TRUE(read_ran) << "a file a CREATE made is opened for its first READ on the receiving thread";
  EXPECT_EQ(read.status, NFS3_OK);
  EXPECT_TRUE(read.eof);
  auto [rename_ran, renamed] = try_inline<RENAME3res>(Proc::RENAME, RENAME3args{{root, "new"}, {root, "moved"}});
  EXPECT_TRUE(rename_ran);
  EXPECT_EQ(renamed.status, NFS3_OK);
  auto [remove_ran, removed] = try_inline<WccRes>(Proc::REMOVE, diropargs3{root, "moved"});
  EXPECT_TRUE(remove_ran);
  EXPECT_EQ(removed.status, NFS3_OK);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/moved"));
  EXPECT_EQ(change_commits().value(), before);
}

}  // namespace
}  // namespace nfsrdma::server
