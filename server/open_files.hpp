// Descriptors open for READ, WRITE and COMMIT, directories LOOKUP looked
// in, and what a change made, kept between calls (nfsd's open-file cache): a call that finds its file
// here neither resolves its handle nor reopens the file, so a cached READ is
// fstat, faccessat2 and pread, and its inode is in memory (calls over RDMA
// run on the connection's thread only then).
//
// An entry holds the object's O_PATH descriptor and, for a file read or
// written, one opened by root for reading or for writing (a file has up to
// three entries: read, write, path); a `path` entry has only the first.
// Permission stays the caller's, checked on every call (NfsService::io_file).
// Bounded: at most `capacity` entries, the least recently used closed first,
// and a reaper thread closes what was unused for `idle`, so that a file removed
// on the server does not keep its space, nor a file written here its ETXTBSY,
// for longer. REMOVE and RENAME forget what they unlink; a call that finds
// its file has no links left forgets it too (its handle is stale).
#pragma once

#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "lib/base/fd.hpp"
#include "lib/nfs3/nfs3_types.hpp"

namespace nfsrdma::server {

class OpenFiles {
 public:
  struct File {
    std::uint32_t export_id = 0;
    Fd path;  // O_PATH
    Fd io;    // O_RDONLY, or O_RDWR for a writer, opened as root; none for Use::path
  };
  // What an entry is kept for (the last byte of its key).
  // `path`: the O_PATH descriptor alone, for a directory a LOOKUP looked in
  // or a change was made in, and for what a CREATE, MKDIR, SYMLINK or MKNOD
  // just made, so the changes that follow there (a mode, times, an owner;
  // names in a new directory) run on a transport's thread.
  enum class Use : char { read = 'r', write = 'w', path = 'p' };

  OpenFiles(std::size_t capacity, std::chrono::milliseconds idle);
  ~OpenFiles();
  OpenFiles(const OpenFiles&) = delete;
  OpenFiles& operator=(const OpenFiles&) = delete;

  // The entry for `fh` kept for `use`, or null.
  std::shared_ptr<const File> get(const nfs3::nfs_fh3& fh, Use use);
  // Any entry for `fh`, or null, not counted as a lookup. As it is (a
  // GETATTR run on a transport's thread), or with `keep` kept open longer, as
  // a use (a change there: its directory serves the next ones).
  std::shared_ptr<const File> peek(const nfs3::nfs_fh3& fh, bool keep = false);
  // Keeps `f` as the entry for `fh` (replacing one another call added first).
  std::shared_ptr<const File> put(const nfs3::nfs_fh3& fh, Use use, File f);
  // Closes every entry for `fh`, once the calls using them are done.
  void forget(const nfs3::nfs_fh3& fh);
  std::size_t size();

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::shared_ptr<const File> file;
    std::list<std::string>::iterator lru;  // in lru_, most recent first
    Clock::time_point used;
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // The map key: the handle's bytes and the Use, built without allocating.
  class Key {
   public:
    Key(const nfs3::nfs_fh3& fh, Use use);
    std::string_view view() const { return {buf_, len_}; }

   private:
    char buf_[nfs3::kFhSize + 1];
    std::size_t len_;
  };
  // Drops the entry at `it` (mu_ held); its file closes when `out` goes.
  void drop(std::unordered_map<std::string, Entry, Hash, std::equal_to<>>::iterator it,
            std::vector<std::shared_ptr<const File>>& out);
  void reap(std::stop_token stop);

  const std::size_t capacity_;
  const std::chrono::milliseconds idle_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry, Hash, std::equal_to<>> entries_;
  std::list<std::string> lru_;
  std::condition_variable_any reaper_cv_;
  std::jthread reaper_;  // last: stops before the rest goes
};

}  // namespace nfsrdma::server
