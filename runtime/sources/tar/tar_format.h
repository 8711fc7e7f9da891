// POSIX tar archives as WebDataset shards: a header scanner that lists the
// regular members of a shard without reading their data, the WebDataset key
// convention, a read-time header check, and a deterministic ustar writer.
//
// Member names are only ever strings (keys in messages and in the index); they
// are never used as file system paths.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/result.h"

namespace sluice::runtime::tar {

inline constexpr uint64_t kBlockSize = 512;

// One regular file member of an archive.
struct Member {
  std::string name;            // full name: ustar prefix, GNU long name or pax path applied
  uint64_t header_offset = 0;  // byte offset of the member's own ustar header
  uint64_t data_offset = 0;    // header_offset + 512: where its bytes start
  uint64_t size = 0;           // its byte count (pax `size` applied)
  // A GNU sparse member (type 'S', or pax GNU.sparse.* records): its `size`
  // stored bytes are a sparse map and the non-hole parts, not the file's
  // contents (for 'S' they start after its sparse extension blocks, which
  // may follow the header), and `name` is its real name (pax GNU.sparse.name).
  bool sparse = false;
  // The first bytes of the data when the scanner already holds them in memory
  // (valid during the callback only; may be shorter than `size` or empty).
  std::span<const uint8_t> head;
};

// Why a scan stopped on corrupt data (recorded in the index for the part of a
// shard that could not be read; see shard_index.h).
enum class ScanErrorKind : uint32_t {
  kNone = 0,
  kBadChecksum = 1,  // a header's checksum does not match its bytes
  kTruncated = 2,    // a header or member runs past the end of the file
  kBadField = 3,     // a size field (octal, base-256 or pax) cannot be parsed
  kBadExtended = 4,  // a GNU long name or pax header is malformed or too large
  kReadError = 5,    // pread failed
};

// "bad header checksum", "truncated", ... (for messages).
const char* ScanErrorKindName(ScanErrorKind kind);

// Where and why ScanArchive stopped, for a kCorruptData result.
struct ScanStop {
  uint64_t offset = 0;  // byte offset of the header (or data) that is bad
  ScanErrorKind kind = ScanErrorKind::kNone;
};

// Lists the regular members of the tar archive in `fd` (file_size bytes), in
// archive order, calling on_member for each; on_member's error stops the scan
// and is returned as is. Headers are read with pread in small windows; member
// data is skipped, not read. Handles ustar (prefix), GNU ('L' long names, 'K'
// long links, base-256 sizes), pax ('x': path, size and GNU.sparse.name; 'g'
// ignored) and v7 headers. GNU sparse members ('S', or pax GNU.sparse.*) are
// listed with `sparse` set. Directories, links, devices and FIFOs are
// skipped. The archive ends at a zero block or at EOF on a block boundary.
// Errors: kCorruptData naming `shard_name` and the byte offset (bad checksum,
// truncated header or member, unparsable size, malformed long name or pax
// record), kIo when pread fails; `stop` (when given) is filled for those.
Status ScanArchive(int fd, uint64_t file_size, std::string_view shard_name,
                   const std::function<Status(const Member&)>& on_member, ScanStop* stop = nullptr);

// WebDataset's key convention: key = directory + base name up to its first
// '.', extension = the rest after that dot ("a/b.seg.png" -> {"a/b",
// "seg.png"}). A base name without a dot, or one that starts with a dot (a
// hidden file: ".DS_Store", macOS's "._x.jpg"; WebDataset's key regex
// `^((?:.*/|)[^.]+)[.]([^/]*)$` rejects it too), gives {member_name, ""}:
// an empty extension, so the member is no field of any sample.
std::pair<std::string_view, std::string_view> SplitKey(std::string_view member_name);

// Extension comparison (ASCII case-insensitive): "JPG" matches "jpg".
bool ExtensionEquals(std::string_view a, std::string_view b);

// Checks that `header512` is a valid tar header (checksum) for a regular
// member of `expected_size` bytes: used at read time to detect a shard that
// changed after it was indexed. Errors: kCorruptData saying what differs.
Status VerifyHeaderFor(std::span<const uint8_t> header512, uint64_t expected_size);

// The member name stored in a ustar header (prefix + '/' + name for POSIX
// ustar); empty if the header's checksum is bad. Not resolved through a GNU
// long name or pax record (those precede the header: MemberNameAt is). For
// messages only.
std::string HeaderName(std::span<const uint8_t> header512);

// The full name (ustar prefix, GNU long name, pax path or GNU.sparse.name
// applied) of the member whose own ustar header is at `header_offset` in the
// archive in `fd`, found by scanning the headers from `scan_from`: a header
// boundary at or before it outside any extended header's run (0, or the
// ustar header of an earlier member, e.g. the previous sample's record offset
// - 512; ScanArchive's other rules apply). Reads only the headers in between
// (and extended headers' data). "" when no listed member's header is there or
// the headers cannot be read. For messages: a bad sample's key, without a
// string per sample in the index.
std::string MemberNameAt(int fd, uint64_t scan_from, uint64_t header_offset);

// A deterministic POSIX ustar writer (for `sluice pack`): every member is a
// regular file with mode 0644, uid/gid 0, empty user and group names and
// mtime 0, so the same members in the same order give byte-identical files.
// The archive ends with two zero blocks, padded to a 10240-byte record as GNU
// tar and Python's tarfile do. Readable by GNU tar, Python tarfile and
// webdataset. Not thread-safe; movable.
class Writer {
 public:
  // Creates (truncates) `path`. Errors: kIo naming the path.
  static Result<Writer> Create(const std::string& path);

  Writer(Writer&& other) noexcept;
  Writer& operator=(Writer&& other) noexcept;
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer();  // closes the file (without the end blocks when Finish was not called)

  // Appends one member and returns the byte offset of its data in the file
  // (its header is the 512 bytes before). Names longer than 100 bytes are
  // split at a '/' into the ustar prefix (at most 155 bytes) and name.
  // Errors: kInvalidArgument for an empty name, a name with a NUL byte, or
  // one that does not fit ustar; kInvalidArgument for data of 8 GiB or more;
  // kIo on a write failure; kInvalidArgument after Finish.
  Result<uint64_t> Add(std::string_view name, std::span<const uint8_t> data);

  // Writes the end blocks and closes the file; returns the file's size.
  // Errors: kIo.
  Result<uint64_t> Finish();

  // Bytes written so far (headers, data, padding).
  uint64_t bytes_written() const { return written_; }
  const std::string& path() const { return path_; }

 private:
  Writer(int fd, std::string path);
  Status Write(const uint8_t* data, size_t n);
  Status Flush();

  int fd_ = -1;
  std::string path_;
  uint64_t written_ = 0;
  std::string buffer_;  // pending bytes, flushed at 1 MiB
  bool finished_ = false;
};

}  // namespace sluice::runtime::tar
