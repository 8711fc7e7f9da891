#include "pack/restart_markers.h"

#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <cstdlib>
#include <cstring>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <csetjmp>
#include <cstdint>
#include <memory>

#include "runtime/decode/decoder.h"
#include "runtime/decode/jpeg_decoder.h"

namespace sluice::runtime {
namespace {

// The widest restart interval, in pixels: the granularity of a splice.
constexpr int kMaxIntervalPixels = 64;

// Fatal libjpeg errors longjmp back; any warning (damaged data) is counted so
// that a damaged file is kept as it is rather than re-encoded "repaired".
struct ErrorMgr {
  jpeg_error_mgr pub;
  std::jmp_buf* jump;  // shared by the decompressor and the compressor
  int warnings;
};

[[noreturn]] void ErrorExit(j_common_ptr cinfo) {
  std::longjmp(*reinterpret_cast<ErrorMgr*>(cinfo->err)->jump, 1);
}

void EmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0) ++reinterpret_cast<ErrorMgr*>(cinfo->err)->warnings;
}

void OutputMessage(j_common_ptr) {}

// Plain data shared by the libjpeg calls, which may longjmp: no C++ objects
// with destructors live in their frames. On the heap, so what they change
// before a longjmp is still there after it.
struct Transcoder {
  std::jmp_buf jump;
  jpeg_decompress_struct in;
  jpeg_compress_struct out;
  ErrorMgr in_err, out_err;
  // The output, written by OutputDestination: malloc'd, `capacity` bytes, of
  // which `size` are written once term_destination ran. Always the live
  // buffer, so freeing it is right whether or not libjpeg longjmp'd: with
  // jpeg_mem_dest, the pointer handed back is only updated at the end, and
  // after the buffer had grown an error left it pointing at a freed block.
  unsigned char* bytes = nullptr;
  size_t capacity = 0;
  size_t size = 0;
  jpeg_destination_mgr dest;
};

constexpr size_t kFirstOutputBuffer = 64 * 1024;

void InitDestination(j_compress_ptr cinfo) {
  auto* t = static_cast<Transcoder*>(cinfo->client_data);
  t->bytes = static_cast<unsigned char*>(std::malloc(kFirstOutputBuffer));
  if (t->bytes == nullptr) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 10);
  t->capacity = kFirstOutputBuffer;
  t->dest.next_output_byte = t->bytes;
  t->dest.free_in_buffer = t->capacity;
}

// The buffer is full: double it (realloc keeps the old one on failure).
boolean EmptyOutputBuffer(j_compress_ptr cinfo) {
  auto* t = static_cast<Transcoder*>(cinfo->client_data);
  auto* grown = static_cast<unsigned char*>(std::realloc(t->bytes, t->capacity * 2));
  if (grown == nullptr) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 10);
  t->bytes = grown;
  t->dest.next_output_byte = grown + t->capacity;
  t->dest.free_in_buffer = t->capacity;
  t->capacity *= 2;
  return TRUE;
}

void TermDestination(j_compress_ptr cinfo) {
  auto* t = static_cast<Transcoder*>(cinfo->client_data);
  t->size = t->capacity - t->dest.free_in_buffer;
}

// The largest interval (in MCUs) dividing the MCUs per row and at most
// kMaxIntervalPixels wide, or 0 when the file is to be kept as it is.
int IntervalFor(const jpeg_decompress_struct& in) {
  const bool gray = in.num_components == 1 && in.jpeg_color_space == JCS_GRAYSCALE;
  const bool ycc = in.num_components == 3 && in.jpeg_color_space == JCS_YCbCr;
  if (in.progressive_mode || in.arith_code || in.data_precision != 8 || !(gray || ycc)) return 0;
  // What the loader's decoder refuses by default is not worth re-encoding, and
  // re-encoding holds every coefficient in memory: a 200-byte file claiming
  // 65500x65500 pixels took 8 GB.
  if (in.image_width > static_cast<JDIMENSION>(kMaxJpegSide) ||
      in.image_height > static_cast<JDIMENSION>(kMaxJpegSide) ||
      int64_t{in.image_width} * in.image_height > kDefaultMaxPixels) {
    return 0;
  }
  const int mcu_width = gray ? 8 : 8 * in.max_h_samp_factor;
  const int per_row = static_cast<int>((in.image_width + mcu_width - 1) / mcu_width);
  if (in.restart_interval > 0 && per_row % static_cast<int>(in.restart_interval) == 0) return 0;
  for (int k = kMaxIntervalPixels / mcu_width; k > 1; --k) {
    if (per_row % k == 0) return k;
  }
  return 1;
}

// True for a marker the encoder writes itself (JFIF APP0, Adobe APP14).
bool WrittenByEncoder(const jpeg_saved_marker_ptr m, const jpeg_compress_struct& out) {
  const bool jfif =
      m->marker == JPEG_APP0 && m->data_length >= 5 && std::memcmp(m->data, "JFIF", 5) == 0;
  const bool adobe =
      m->marker == JPEG_APP0 + 14 && m->data_length >= 5 && std::memcmp(m->data, "Adobe", 5) == 0;
  return (jfif && out.write_JFIF_header) || (adobe && out.write_Adobe_marker);
}

// All libjpeg calls; true when t.bytes holds the re-encoded file.
bool Transcode(Transcoder& t, std::span<const uint8_t> jpeg) {
  jpeg_mem_src(&t.in, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_save_markers(&t.in, JPEG_COM, 0xFFFF);
  for (int i = 0; i < 16; ++i) jpeg_save_markers(&t.in, JPEG_APP0 + i, 0xFFFF);
  jpeg_read_header(&t.in, TRUE);
  const int interval = IntervalFor(t.in);
  if (interval == 0) return false;
  jvirt_barray_ptr* coefficients = jpeg_read_coefficients(&t.in);
  if (t.in_err.warnings > 0) return false;

  t.dest.init_destination = InitDestination;
  t.dest.empty_output_buffer = EmptyOutputBuffer;
  t.dest.term_destination = TermDestination;
  t.out.dest = &t.dest;
  jpeg_copy_critical_parameters(&t.in, &t.out);
  t.out.optimize_coding = TRUE;
  t.out.restart_interval = static_cast<unsigned>(interval);
  jpeg_write_coefficients(&t.out, coefficients);
  for (jpeg_saved_marker_ptr m = t.in.marker_list; m; m = m->next) {
    if (!WrittenByEncoder(m, t.out)) jpeg_write_marker(&t.out, m->marker, m->data, m->data_length);
  }
  jpeg_finish_compress(&t.out);
  jpeg_finish_decompress(&t.in);
  return t.in_err.warnings == 0 && t.out_err.warnings == 0;
}

}  // namespace

bool AddRestartMarkers(std::span<const uint8_t> jpeg, std::vector<uint8_t>& out) {
  auto t = std::make_unique<Transcoder>();
  t->in.err = jpeg_std_error(&t->in_err.pub);
  t->out.err = jpeg_std_error(&t->out_err.pub);
  for (ErrorMgr* e : {&t->in_err, &t->out_err}) {
    e->pub.error_exit = ErrorExit;
    e->pub.emit_message = EmitMessage;
    e->pub.output_message = OutputMessage;
    e->jump = &t->jump;
    e->warnings = 0;
  }
  jpeg_create_decompress(&t->in);
  jpeg_create_compress(&t->out);
  t->out.client_data = t.get();
  bool done = false;
  if (setjmp(t->jump) == 0) done = Transcode(*t, jpeg);
  jpeg_destroy_compress(&t->out);
  jpeg_destroy_decompress(&t->in);
  if (done) out.assign(t->bytes, t->bytes + t->size);
  std::free(t->bytes);
  return done;
}

}  // namespace sluice::runtime
