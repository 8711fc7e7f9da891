#include "runtime/sources/tar/tar_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "common/pread_full.h"

namespace sluice::runtime::tar {
namespace {

// ustar header fields: offset and length.
constexpr size_t kNameOff = 0, kNameLen = 100;
constexpr size_t kModeOff = 100, kUidOff = 108, kGidOff = 116;
constexpr size_t kSizeOff = 124, kSizeLen = 12;
constexpr size_t kMtimeOff = 136;
constexpr size_t kChksumOff = 148, kChksumLen = 8;
constexpr size_t kTypeOff = 156;
constexpr size_t kMagicOff = 257;
constexpr size_t kDevMajorOff = 329, kDevMinorOff = 337;
constexpr size_t kPrefixOff = 345, kPrefixLen = 155;
constexpr size_t kSparseExtendedOff = 482;  // old GNU sparse header: more sparse blocks follow
constexpr size_t kSparseBlockExtendedOff = 504;

// Headers are read in windows of this many bytes, so that the small members
// of a sample (label, metadata) and the next headers come in one pread.
constexpr uint64_t kWindow = 16 * 1024;
// Largest GNU long name or pax header accepted.
constexpr uint64_t kMaxExtended = 1 << 20;
// Writer: flush the pending bytes at this size; pad the end to this record.
constexpr size_t kWriteBuffer = 1 << 20;
constexpr uint64_t kRecordSize = 20 * kBlockSize;

uint64_t RoundUp(uint64_t n) { return (n + kBlockSize - 1) / kBlockSize * kBlockSize; }

std::string_view CString(const uint8_t* p, size_t max_len) {
  const char* c = reinterpret_cast<const char*>(p);
  return std::string_view(c, strnlen(c, max_len));
}

// A numeric header field: octal digits with optional leading spaces, ended by
// NUL or space (all NUL = 0), or GNU base-256 (high bit of the first byte set;
// negative values rejected). nullopt when malformed or over 2^63 - 1.
std::optional<uint64_t> ParseNumber(const uint8_t* p, size_t len) {
  if (p[0] & 0x80) {
    if (p[0] & 0x40) return std::nullopt;  // negative
    uint64_t v = p[0] & 0x3f;
    for (size_t i = 1; i < len; ++i) {
      if (v >> 55) return std::nullopt;
      v = (v << 8) | p[i];
    }
    return v;
  }
  size_t i = 0;
  while (i < len && p[i] == ' ') ++i;
  uint64_t v = 0;
  for (; i < len && p[i] != 0 && p[i] != ' '; ++i) {
    if (p[i] < '0' || p[i] > '7') return std::nullopt;
    if (v >> 60) return std::nullopt;
    v = v * 8 + static_cast<uint64_t>(p[i] - '0');
  }
  for (; i < len; ++i) {
    if (p[i] != 0 && p[i] != ' ') return std::nullopt;
  }
  return v;
}

bool ChecksumOk(const uint8_t* h) {
  auto stored = ParseNumber(h + kChksumOff, kChksumLen);
  if (!stored) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlockSize; ++i) {
    const uint8_t b = (i >= kChksumOff && i < kChksumOff + kChksumLen) ? ' ' : h[i];
    unsigned_sum += b;
    signed_sum += static_cast<int8_t>(b);
  }
  return *stored == unsigned_sum || static_cast<int64_t>(*stored) == signed_sum;
}

bool AllZero(const uint8_t* h) {
  return std::all_of(h, h + kBlockSize, [](uint8_t b) { return b == 0; });
}

bool IsPosixUstar(const uint8_t* h) { return std::memcmp(h + kMagicOff, "ustar\0", 6) == 0; }

std::string NameFromHeader(const uint8_t* h) {
  std::string name(CString(h + kNameOff, kNameLen));
  if (IsPosixUstar(h)) {  // GNU's "ustar  " uses the prefix bytes for other fields
    std::string_view prefix = CString(h + kPrefixOff, kPrefixLen);
    if (!prefix.empty()) name = std::string(prefix) + "/" + name;
  }
  return name;
}

// Reads headers (and small data) through a window over the file.
class WindowReader {
 public:
  WindowReader(int fd, uint64_t file_size) : fd_(fd), file_size_(file_size), buf_(kWindow) {}

  // Points `out` at bytes [pos, pos + n) (n <= kWindow), reading a new window
  // when they are not held. Fails on a read error or a short file.
  Status Get(uint64_t pos, uint64_t n, const uint8_t*& out) {
    if (pos < start_ || pos + n > start_ + len_) {
      const uint64_t want = std::min<uint64_t>(kWindow, file_size_ - pos);
      const int64_t got = PreadFull(fd_, buf_.data(), want, pos);
      if (got < 0) return MakeError(ErrorCode::kIo, std::strerror(static_cast<int>(-got)));
      start_ = pos;
      len_ = static_cast<uint64_t>(got);
      if (len_ < n) return MakeError(ErrorCode::kCorruptData, "the file ended early");
    }
    out = buf_.data() + (pos - start_);
    return Ok();
  }

  // The bytes of [pos, pos + n) already held, from pos on (maybe fewer).
  std::span<const uint8_t> Held(uint64_t pos, uint64_t n) const {
    if (pos < start_ || pos >= start_ + len_) return {};
    return {buf_.data() + (pos - start_), std::min<uint64_t>(n, start_ + len_ - pos)};
  }

  // Reads [pos, pos + n) into `out` (any n). Fails as Get.
  Status ReadInto(uint64_t pos, uint64_t n, std::string& out) {
    out.resize(n);
    const int64_t got = PreadFull(fd_, out.data(), n, pos);
    if (got < 0) return MakeError(ErrorCode::kIo, std::strerror(static_cast<int>(-got)));
    if (static_cast<uint64_t>(got) < n) {
      return MakeError(ErrorCode::kCorruptData, "the file ended early");
    }
    return Ok();
  }

 private:
  int fd_;
  uint64_t file_size_;
  std::vector<uint8_t> buf_;
  uint64_t start_ = 0, len_ = 0;
};

// Decimal digits only (no sign, no spaces), all of `text`; nullopt when empty,
// malformed or over 2^64 - 1.
std::optional<uint64_t> ParseDecimal(std::string_view text) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

// Pending values from GNU long-name and pax headers for the next member.
struct Pending {
  std::optional<std::string> long_name;    // 'L'
  std::optional<std::string> pax_path;     // 'x' path=
  std::optional<uint64_t> pax_size;        // 'x' size=
  std::optional<std::string> sparse_name;  // 'x' GNU.sparse.name= (the real name)
  bool pax_sparse = false;                 // 'x' any GNU.sparse.* record
  bool any() const { return long_name || pax_path || pax_size || sparse_name || pax_sparse; }
};

// Parses pax records "LEN KEY=VALUE\n" (path, size, GNU.sparse.name and
// whether any GNU.sparse.* record is there are kept). False when malformed.
bool ParsePax(std::string_view data, Pending& pending) {
  while (!data.empty()) {
    size_t sp = data.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp > 20) return false;
    auto parsed = ParseDecimal(data.substr(0, sp));
    if (!parsed) return false;
    const uint64_t len = *parsed;
    if (len <= sp + 1 || len > data.size() || data[len - 1] != '\n') return false;
    std::string_view record = data.substr(sp + 1, len - sp - 2);
    size_t eq = record.find('=');
    if (eq == std::string_view::npos) return false;
    std::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") {
      pending.pax_path = std::string(value);
    } else if (key.starts_with("GNU.sparse.")) {
      pending.pax_sparse = true;
      if (key == "GNU.sparse.name") pending.sparse_name = std::string(value);
    } else if (key == "size") {
      if (value.size() > 19) return false;
      auto v = ParseDecimal(value);
      if (!v) return false;
      pending.pax_size = *v;
    }
    data.remove_prefix(len);
  }
  return true;
}

class Scanner {
 public:
  Scanner(int fd, uint64_t file_size, std::string_view shard, ScanStop* stop)
      : reader_(fd, file_size), file_size_(file_size), shard_(shard), stop_(stop) {}

  // Lists the members from the header at `start` (a header boundary) on.
  Status Run(const std::function<Status(const Member&)>& on_member, uint64_t start = 0);

 private:
  // `offset` is clamped to the file's size (a missing member after an
  // extended header is reported at the end of the file).
  std::unexpected<Error> Fail(uint64_t offset, ScanErrorKind kind, const std::string& what) {
    offset = std::min(offset, file_size_);
    if (stop_ != nullptr) *stop_ = ScanStop{offset, kind};
    ErrorCode code = kind == ScanErrorKind::kReadError ? ErrorCode::kIo : ErrorCode::kCorruptData;
    return MakeError(code, std::string(shard_) + ": " + what + " at byte " +
                               std::to_string(offset) + " (" + ScanErrorKindName(kind) + ")");
  }
  // Reads `size` data bytes at `data` (an extended header's payload).
  Status ReadExtended(uint64_t header, uint64_t data, uint64_t size, std::string& out);
  // Skips old GNU sparse extension blocks after the header at `pos`; returns
  // where the data starts.
  Result<uint64_t> SkipSparseBlocks(uint64_t pos, const uint8_t* h);

  WindowReader reader_;
  uint64_t file_size_;
  std::string_view shard_;
  ScanStop* stop_;
};

Status Scanner::ReadExtended(uint64_t header, uint64_t data, uint64_t size, std::string& out) {
  if (size > kMaxExtended) {
    return Fail(header, ScanErrorKind::kBadExtended,
                "long name or pax header of " + std::to_string(size) + " bytes");
  }
  if (data + size > file_size_) {
    return Fail(header, ScanErrorKind::kTruncated, "extended header runs past the end");
  }
  if (auto st = reader_.ReadInto(data, size, out); !st) {
    return Fail(header, ScanErrorKind::kReadError, "cannot read: " + st.error().message);
  }
  return Ok();
}

Result<uint64_t> Scanner::SkipSparseBlocks(uint64_t pos, const uint8_t* h) {
  uint64_t data = pos + kBlockSize;
  bool more = h[kSparseExtendedOff] != 0;
  while (more) {
    if (data + kBlockSize > file_size_) {
      return Fail(data, ScanErrorKind::kTruncated, "sparse header runs past the end");
    }
    const uint8_t* ext = nullptr;
    if (auto st = reader_.Get(data, kBlockSize, ext); !st) {
      return Fail(data, ScanErrorKind::kReadError, "cannot read: " + st.error().message);
    }
    more = ext[kSparseBlockExtendedOff] != 0;
    data += kBlockSize;
  }
  return data;
}

Status Scanner::Run(const std::function<Status(const Member&)>& on_member, uint64_t start) {
  uint64_t pos = start;
  Pending pending;
  Member member;
  std::string extended;
  while (true) {
    if (pos >= file_size_) {
      if (pending.any()) {
        return Fail(pos, ScanErrorKind::kTruncated, "extended header without its member");
      }
      return Ok();  // EOF at a block boundary (or after the last member's data)
    }
    if (pos + kBlockSize > file_size_) {
      return Fail(pos, ScanErrorKind::kTruncated, "partial header block");
    }
    const uint8_t* h = nullptr;
    if (auto st = reader_.Get(pos, kBlockSize, h); !st) {
      return Fail(pos, ScanErrorKind::kReadError, "cannot read header: " + st.error().message);
    }
    if (AllZero(h)) {
      if (pending.any()) {
        return Fail(pos, ScanErrorKind::kTruncated, "extended header without its member");
      }
      return Ok();  // end-of-archive block
    }
    if (!ChecksumOk(h)) return Fail(pos, ScanErrorKind::kBadChecksum, "bad tar header checksum");
    auto field_size = ParseNumber(h + kSizeOff, kSizeLen);
    if (!field_size) return Fail(pos, ScanErrorKind::kBadField, "bad size field");
    const char type = static_cast<char>(h[kTypeOff]);
    const uint64_t data = pos + kBlockSize;
    uint64_t size = *field_size;
    if (type == 'L' || type == 'x') {
      SLUICE_RETURN_IF_ERROR(ReadExtended(pos, data, size, extended));
      if (type == 'L') {
        pending.long_name = std::string(extended.c_str());  // up to its NUL
      } else if (!ParsePax(extended, pending)) {
        return Fail(pos, ScanErrorKind::kBadExtended, "malformed pax header");
      }
      pos = data + RoundUp(size);
      continue;
    }
    if (type == 'K' || type == 'g') {  // long link name, global pax: not needed
      if (data + size > file_size_) {
        return Fail(pos, ScanErrorKind::kTruncated, "extended header runs past the end");
      }
      pos = data + RoundUp(size);
      continue;
    }
    const bool regular = type == '0' || type == '\0' || type == '7';
    if (regular && pending.pax_size) size = *pending.pax_size;
    if (type >= '1' && type <= '6') {  // links, devices, directories, FIFOs: no data
      pos = data;
      pending = Pending{};
      continue;
    }
    uint64_t data_start = data;
    if (type == 'S') {
      auto start = SkipSparseBlocks(pos, h);
      if (!start) return std::unexpected(start.error());
      data_start = *start;
    }
    if (size > file_size_ || data_start + size > file_size_) {
      return Fail(pos, ScanErrorKind::kTruncated,
                  "member of " + std::to_string(size) + " bytes runs past the end of the file (" +
                      std::to_string(file_size_) + " bytes): truncated");
    }
    if (regular || type == 'S') {
      if (pending.sparse_name) {
        member.name = std::move(*pending.sparse_name);  // not ./GNUSparseFile.N/...
      } else if (pending.pax_path) {
        member.name = std::move(*pending.pax_path);
      } else if (pending.long_name) {
        member.name = std::move(*pending.long_name);
      } else {
        member.name = NameFromHeader(h);
      }
      member.header_offset = pos;
      member.data_offset = data;
      member.size = size;
      member.sparse = type == 'S' || pending.pax_sparse;
      member.head = member.sparse ? std::span<const uint8_t>() : reader_.Held(data, size);
      SLUICE_RETURN_IF_ERROR(on_member(member));
    }
    pending = Pending{};
    pos = data_start + RoundUp(size);
  }
}

// Writes `v` as zero-padded octal in a field of `len` bytes ending with NUL.
void PutOctal(uint8_t* field, size_t len, uint64_t v) {
  field[len - 1] = 0;
  for (size_t i = len - 1; i-- > 0;) {
    field[i] = static_cast<uint8_t>('0' + (v & 7));
    v >>= 3;
  }
}

}  // namespace

const char* ScanErrorKindName(ScanErrorKind kind) {
  switch (kind) {
    case ScanErrorKind::kNone:
      return "no error";
    case ScanErrorKind::kBadChecksum:
      return "bad header checksum";
    case ScanErrorKind::kTruncated:
      return "truncated";
    case ScanErrorKind::kBadField:
      return "bad size field";
    case ScanErrorKind::kBadExtended:
      return "bad long name or pax header";
    case ScanErrorKind::kReadError:
      return "read error";
  }
  return "unknown error";
}

Status ScanArchive(int fd, uint64_t file_size, std::string_view shard_name,
                   const std::function<Status(const Member&)>& on_member, ScanStop* stop) {
  Scanner scanner(fd, file_size, shard_name, stop);
  return scanner.Run(on_member);
}

std::string MemberNameAt(int fd, uint64_t scan_from, uint64_t header_offset) {
  struct stat st;
  if (scan_from > header_offset || scan_from % kBlockSize != 0 || ::fstat(fd, &st) != 0) {
    return "";
  }
  std::string name;
  Scanner scanner(fd, static_cast<uint64_t>(st.st_size), "", nullptr);
  (void)scanner.Run(
      [&](const Member& m) -> Status {
        if (m.header_offset < header_offset) return Ok();
        if (m.header_offset == header_offset) name = m.name;
        return MakeError(ErrorCode::kNotFound, "");  // stop: at or past it
      },
      scan_from);
  return name;
}

std::pair<std::string_view, std::string_view> SplitKey(std::string_view member_name) {
  const size_t slash = member_name.rfind('/');
  const size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  const size_t dot = member_name.find('.', base);
  // No dot, or a hidden base name (".DS_Store", "._x.jpg"): no field.
  if (dot == std::string_view::npos || dot == base) return {member_name, {}};
  return {member_name.substr(0, dot), member_name.substr(dot + 1)};
}

bool ExtensionEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

Status VerifyHeaderFor(std::span<const uint8_t> header512, uint64_t expected_size) {
  if (header512.size() < kBlockSize) {
    return MakeError(ErrorCode::kCorruptData, "short tar header");
  }
  const uint8_t* h = header512.data();
  if (!ChecksumOk(h)) return MakeError(ErrorCode::kCorruptData, "bad tar header checksum");
  const char type = static_cast<char>(h[kTypeOff]);
  if (type != '0' && type != '\0' && type != '7') {
    return MakeError(ErrorCode::kCorruptData,
                     std::string("tar header is not a regular file (type '") + type + "')");
  }
  auto size = ParseNumber(h + kSizeOff, kSizeLen);
  if (!size || *size != expected_size) {
    return MakeError(ErrorCode::kCorruptData,
                     "tar header says " + (size ? std::to_string(*size) : "an unparsable") +
                         " bytes, the index " + std::to_string(expected_size) +
                         ": the shard changed after it was indexed");
  }
  return Ok();
}

std::string HeaderName(std::span<const uint8_t> header512) {
  if (header512.size() < kBlockSize || !ChecksumOk(header512.data())) return {};
  return NameFromHeader(header512.data());
}

// ---- Writer -------------------------------------------------------------------

Writer::Writer(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
  buffer_.reserve(kWriteBuffer + kBlockSize);
}

Writer::Writer(Writer&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      written_(other.written_),
      buffer_(std::move(other.buffer_)),
      finished_(other.finished_) {}

Writer& Writer::operator=(Writer&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    written_ = other.written_;
    buffer_ = std::move(other.buffer_);
    finished_ = other.finished_;
  }
  return *this;
}

Writer::~Writer() {
  if (fd_ >= 0) {
    (void)Flush();
    ::close(fd_);
  }
}

Result<Writer> Writer::Create(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    return MakeError(ErrorCode::kIo, "cannot create '" + path + "': " + std::strerror(errno));
  }
  return Writer(fd, path);
}

Status Writer::Flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return MakeError(ErrorCode::kIo, "cannot write '" + path_ + "': " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return Ok();
}

Status Writer::Write(const uint8_t* data, size_t n) {
  while (n > 0) {
    const size_t take = std::min(n, kWriteBuffer - buffer_.size());
    buffer_.append(reinterpret_cast<const char*>(data), take);
    data += take;
    n -= take;
    written_ += take;
    if (buffer_.size() >= kWriteBuffer) SLUICE_RETURN_IF_ERROR(Flush());
  }
  return Ok();
}

Result<uint64_t> Writer::Add(std::string_view name, std::span<const uint8_t> data) {
  if (finished_ || fd_ < 0) {
    return MakeError(ErrorCode::kInvalidArgument, "tar writer for '" + path_ + "' is finished");
  }
  if (name.empty() || name.find('\0') != std::string_view::npos || name.back() == '/') {
    return MakeError(ErrorCode::kInvalidArgument,
                     "bad tar member name '" + std::string(name.substr(0, name.find('\0'))) + "'");
  }
  if (data.size() >= (uint64_t{1} << 33)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tar member '" + std::string(name) + "' is 8 GiB or more (ustar limit)");
  }
  std::string_view prefix, base = name;
  if (name.size() > kNameLen) {
    // The last '/' within the first 156 bytes, as Python's tarfile splits.
    const size_t slash = name.substr(0, kPrefixLen + 1).rfind('/');
    if (slash == std::string_view::npos || name.size() - slash - 1 > kNameLen || slash == 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "tar member name does not fit ustar (100 bytes, or a 155-byte directory "
                       "prefix and 100 bytes): '" +
                           std::string(name) + "'");
    }
    prefix = name.substr(0, slash);
    base = name.substr(slash + 1);
  }
  uint8_t h[kBlockSize] = {};
  std::memcpy(h + kNameOff, base.data(), base.size());
  PutOctal(h + kModeOff, 8, 0644);
  PutOctal(h + kUidOff, 8, 0);
  PutOctal(h + kGidOff, 8, 0);
  PutOctal(h + kSizeOff, kSizeLen, data.size());
  PutOctal(h + kMtimeOff, 12, 0);
  h[kTypeOff] = '0';
  std::memcpy(h + kMagicOff,
              "ustar\0"
              "00",
              8);
  PutOctal(h + kDevMajorOff, 8, 0);
  PutOctal(h + kDevMinorOff, 8, 0);
  // An empty prefix's data() is null: memcpy from null is undefined even for 0 bytes.
  if (!prefix.empty()) std::memcpy(h + kPrefixOff, prefix.data(), prefix.size());
  std::memset(h + kChksumOff, ' ', kChksumLen);
  uint64_t sum = 0;
  for (uint8_t b : h) sum += b;
  PutOctal(h + kChksumOff, 7, sum);  // six digits, NUL, then the space left in place

  SLUICE_RETURN_IF_ERROR(Write(h, kBlockSize));
  const uint64_t data_offset = written_;
  SLUICE_RETURN_IF_ERROR(Write(data.data(), data.size()));
  static constexpr uint8_t kZeros[kBlockSize] = {};
  SLUICE_RETURN_IF_ERROR(Write(kZeros, RoundUp(data.size()) - data.size()));
  return data_offset;
}

Result<uint64_t> Writer::Finish() {
  if (finished_ || fd_ < 0) {
    return MakeError(ErrorCode::kInvalidArgument, "tar writer for '" + path_ + "' is finished");
  }
  static constexpr uint8_t kZeros[kBlockSize] = {};
  SLUICE_RETURN_IF_ERROR(Write(kZeros, kBlockSize));
  SLUICE_RETURN_IF_ERROR(Write(kZeros, kBlockSize));
  while (written_ % kRecordSize != 0) SLUICE_RETURN_IF_ERROR(Write(kZeros, kBlockSize));
  SLUICE_RETURN_IF_ERROR(Flush());
  finished_ = true;
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    return MakeError(ErrorCode::kIo, "cannot close '" + path_ + "': " + std::strerror(errno));
  }
  return written_;
}

}  // namespace sluice::runtime::tar
