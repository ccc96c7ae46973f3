// A small re-implementation of the L3 scheme (Bae et al., ECCV 2022) as the size baseline.
// See shared/design/evidence.md section 1 and bench/README.md.
//
// Scheme, as published:
//   - each channel is coded as its own plane (R, G, B; gray and alpha are planes too); no colour
//     transform;
//   - a plane is cut into independent P x P patches, P = 64, or P = 32 for small images (an image
//     whose width or height is below 256); edge patches are smaller;
//   - a patch's first row is stored raw (8 bits per sample);
//   - every other sample is predicted from the row above only: the PNG Paeth function applied to
//     (upper-left, up, upper-right), i.e. p = UL + U - UR, the one of UL, U, UR nearest to p, ties
//     to UL then U;
//   - a neighbour outside the patch (UL at a patch's left edge, UR at its right edge) reads as U
//     by default (L3BaselineEdge::replicate). The public reference CUDA code reads 0 there; Paeth
//     then picks 0 at the left edge of almost every row, and that one residual forces the whole
//     row record to 7-8 bits per sample. L3BaselineEdge::zero reproduces it (bench_codec
//     --l3b-zero-edges); the default is the stronger, fairer baseline;
//   - the residuals (x - prediction) mod 256 of one patch row (up to 64 samples), read as signed
//     bytes (-128..127, as the reference code's `char` residuals), are bit-packed: 4-bit width,
//     8-bit base = min residual, then each residual - base in `width` bits, where width = bits
//     needed for (max - min). (Reading them unsigned would put -1 and +1 at 255 and 1, and most
//     rows would need 8 bits: 22.7 bpp on the photos, near raw.) Each row record is padded to a whole byte (12 + 64 w
//     bits -> 2 + 8 w bytes, as the reference code's per-row byte count).
//
// Container (ours, needed for random access and counted in the size): a 16-byte header
// ("L3BL", u32 width, u32 height, u8 channels, u8 edge mode, u8 patch size, u8 0) and a u32 offset per patch per
// plane (0.008 bits per sample at P = 64). Bits are written LSB first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace l3bench {

enum class L3BaselineEdge : std::uint8_t { replicate = 0, zero = 1 };

// Patch side used for an image: 32 when width or height < 256, else 64.
std::uint32_t l3_baseline_patch_size(std::uint32_t width, std::uint32_t height);

// Encodes interleaved 8-bit pixels (channels 1..4).
std::vector<std::uint8_t> l3_baseline_encode(const std::uint8_t* pixels, std::uint32_t width,
                                             std::uint32_t height, std::uint32_t channels,
                                             L3BaselineEdge edge = L3BaselineEdge::replicate);

// Decodes a stream made by l3_baseline_encode back to interleaved pixels. Throws
// std::runtime_error on malformed input.
std::vector<std::uint8_t> l3_baseline_decode(std::span<const std::uint8_t> encoded, std::uint32_t* width,
                                             std::uint32_t* height, std::uint32_t* channels);

// Size of l3_baseline_encode's output.
std::size_t l3_baseline_encoded_size(const std::uint8_t* pixels, std::uint32_t width, std::uint32_t height,
                                     std::uint32_t channels, L3BaselineEdge edge = L3BaselineEdge::replicate);

}  // namespace l3bench
