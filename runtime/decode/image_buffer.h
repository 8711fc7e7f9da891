// A reusable 8-bit image buffer (rows of width * channels bytes, stride apart).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace sluice::runtime {

class ImageBuffer {
 public:
  ImageBuffer() = default;
  ImageBuffer(ImageBuffer&&) = default;
  ImageBuffer& operator=(ImageBuffer&&) = default;

  // Sets the shape to height x width x channels with stride = width * channels
  // (packed rows). Allocates only when the new size exceeds the capacity; the
  // contents are then unspecified. Dimensions must be >= 0.
  void Reset(int width, int height, int channels) {
    width_ = width;
    height_ = height;
    channels_ = channels;
    stride_ = static_cast<size_t>(width) * static_cast<size_t>(channels);
    size_t need = stride_ * static_cast<size_t>(height);
    if (need > capacity_) {
      data_.reset(new uint8_t[need]);  // uninitialized on purpose
      capacity_ = need;
    }
  }

  int width() const { return width_; }
  int height() const { return height_; }
  int channels() const { return channels_; }
  size_t stride() const { return stride_; }  // bytes between row starts
  size_t size_bytes() const { return stride_ * static_cast<size_t>(height_); }
  size_t capacity() const { return capacity_; }

  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  uint8_t* row(int y) { return data_.get() + stride_ * static_cast<size_t>(y); }
  const uint8_t* row(int y) const { return data_.get() + stride_ * static_cast<size_t>(y); }
  std::span<const uint8_t> bytes() const { return {data_.get(), size_bytes()}; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t capacity_ = 0;
  int width_ = 0;
  int height_ = 0;
  int channels_ = 0;
  size_t stride_ = 0;
};

}  // namespace sluice::runtime
