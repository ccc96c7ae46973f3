// Netpbm: PGM/PPM (P2, P3 ascii; P5, P6 binary) and PAM (P7), 8-bit (maxval 255) only.
// Written by hand: there is no Netpbm library among the project's dependencies and
// the format is a few lines of header.
#include <algorithm>
#include <string>
#include <string_view>

#include "decoders.hpp"

namespace l3 {
namespace {

bool is_space(std::uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(std::uint8_t c) { return c >= '0' && c <= '9'; }

struct PnmHeader {
  char kind = 0;  // '2', '3', '5', '6' or '7'
  std::uint32_t width = 0, height = 0, channels = 0, maxval = 0;
};

// A cursor over the file that turns every malformed or missing byte into an l3::Error.
class PnmParser {
public:
  explicit PnmParser(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  bool at_end() const { return position_ >= bytes_.size(); }
  std::size_t position() const { return position_; }
  std::span<const std::uint8_t> rest() const { return bytes_.subspan(position_); }

  // Whitespace and '#' comments, which the format allows between header fields.
  void skip_space_and_comments() {
    while (!at_end()) {
      if (bytes_[position_] == '#') {
        while (!at_end() && bytes_[position_] != '\n') ++position_;
      } else if (is_space(bytes_[position_])) {
        ++position_;
      } else {
        return;
      }
    }
  }

  std::uint32_t read_number(const char* field) {
    skip_space_and_comments();
    if (at_end()) throw_error(errc::truncated, std::string("PNM: the file ends before ") + field);
    if (!is_digit(bytes_[position_]))
      throw_error(errc::corrupt_header, std::string("PNM: ") + field + " is not a number");
    std::uint64_t value = 0;
    while (!at_end() && is_digit(bytes_[position_])) {
      value = value * 10 + (bytes_[position_++] - '0');
      if (value > UINT32_MAX) throw_error(errc::corrupt_header, std::string("PNM: ") + field + " is too large");
    }
    return static_cast<std::uint32_t>(value);
  }

  // A PAM header token: a run of non-space bytes.
  std::string_view read_word() {
    skip_space_and_comments();
    std::size_t start = position_;
    while (!at_end() && !is_space(bytes_[position_])) ++position_;
    return {reinterpret_cast<const char*>(bytes_.data()) + start, position_ - start};
  }

  void skip_line() {
    while (!at_end() && bytes_[position_] != '\n') ++position_;
  }

  // Exactly one whitespace byte separates a binary header from the samples.
  void expect_single_space() {
    if (at_end()) throw_error(errc::truncated, "PNM: the file ends in the header");
    if (!is_space(bytes_[position_++])) throw_error(errc::corrupt_header, "PNM: no whitespace after the header");
  }

private:
  std::span<const std::uint8_t> bytes_;
  std::size_t position_ = 0;
};

PnmHeader read_pam_header(PnmParser& parser) {
  PnmHeader header{'7', 0, 0, 0, 0};
  for (;;) {
    std::string_view word = parser.read_word();
    if (word.empty()) throw_error(errc::truncated, "PAM: the file ends in the header");
    if (word == "ENDHDR") break;
    if (word == "WIDTH") header.width = parser.read_number("WIDTH");
    else if (word == "HEIGHT") header.height = parser.read_number("HEIGHT");
    else if (word == "DEPTH") header.channels = parser.read_number("DEPTH");
    else if (word == "MAXVAL") header.maxval = parser.read_number("MAXVAL");
    else if (word == "TUPLTYPE") parser.skip_line();  // DEPTH alone fixes the layout
    else throw_error(errc::corrupt_header, "PAM: unknown header field '" + std::string(word) + "'");
  }
  if (header.channels == 0) throw_error(errc::corrupt_header, "PAM: no DEPTH");
  parser.expect_single_space();
  return header;
}

PnmHeader read_header(PnmParser& parser, char kind) {
  if (kind == '7') return read_pam_header(parser);
  PnmHeader header;
  header.kind = kind;
  header.channels = (kind == '3' || kind == '6') ? 3 : 1;
  header.width = parser.read_number("the width");
  header.height = parser.read_number("the height");
  header.maxval = parser.read_number("maxval");
  if (kind == '5' || kind == '6') parser.expect_single_space();
  return header;
}

void check_maxval(std::uint32_t maxval) {
  if (maxval == 0 || maxval > 65535) throw_error(errc::corrupt_header, "PNM: maxval " + std::to_string(maxval) + " is invalid");
  if (maxval > 255) throw_error(errc::unsupported, "16-bit PNM (maxval " + std::to_string(maxval) + ") is not supported");
  // Samples of a smaller maxval mean value/maxval: storing them as 8-bit would change
  // their meaning and rescaling would not be reversible, so refuse.
  if (maxval != 255) throw_error(errc::unsupported, "PNM maxval " + std::to_string(maxval) + " is not supported (only 255)");
}

void read_ascii_samples(PnmParser& parser, Image& image) {
  for (std::uint8_t& sample : image.pixels) {
    std::uint32_t value = parser.read_number("a sample");
    if (value > 255) throw_error(errc::corrupt_header, "PNM: sample " + std::to_string(value) + " exceeds maxval 255");
    sample = static_cast<std::uint8_t>(value);
  }
}

void read_binary_samples(const PnmParser& parser, Image& image) {
  std::span<const std::uint8_t> rest = parser.rest();
  if (rest.size() < image.pixels.size())
    throw_error(errc::truncated, "PNM: " + std::to_string(rest.size()) + " bytes of samples, " +
                std::to_string(image.pixels.size()) + " expected");
  std::copy_n(rest.begin(), image.pixels.size(), image.pixels.begin());
}

void append(std::vector<std::uint8_t>& out, std::string_view text) { out.insert(out.end(), text.begin(), text.end()); }

std::string pnm_header_text(const ImageView& image) {
  const std::string size = std::to_string(image.width) + " " + std::to_string(image.height);
  switch (image.channels) {
    case 1: return "P5\n" + size + "\n255\n";
    case 3: return "P6\n" + size + "\n255\n";
    default:
      return "P7\nWIDTH " + std::to_string(image.width) + "\nHEIGHT " + std::to_string(image.height) +
             "\nDEPTH " + std::to_string(image.channels) + "\nMAXVAL 255\nTUPLTYPE " +
             (image.channels == 2 ? "GRAYSCALE_ALPHA" : "RGB_ALPHA") + "\nENDHDR\n";
  }
}

}  // namespace

namespace detail {

Image decode_pnm(std::span<const std::uint8_t> bytes, const LoadOptions& options) {
  if (bytes.size() < 2 || bytes[0] != 'P') throw_error(errc::bad_magic, "not a PNM file");
  const char kind = static_cast<char>(bytes[1]);
  if (kind == '1' || kind == '4') throw_error(errc::unsupported, "PBM (1-bit bitmap) is not supported");
  if (kind < '2' || kind > '7') throw_error(errc::bad_magic, "not a PNM file");
  PnmParser parser(bytes.subspan(2));
  PnmHeader header = read_header(parser, kind);
  check_maxval(header.maxval);
  // Within the limits, the samples must be present before their buffer is
  // allocated (binary: 1 byte each; ASCII: at least 2, "0 "); otherwise a
  // 20-byte header would allocate up to max_pixels * 4 bytes.
  const Limits& lim = options.limits;
  const std::uint64_t pixels = std::uint64_t{header.width} * header.height;  // u32 * u32: no overflow
  if (header.channels >= 1 && header.channels <= 4 && header.width <= lim.max_width &&
      header.height <= lim.max_height && pixels <= lim.max_pixels) {
    const auto samples = checked_mul<std::uint64_t>(pixels, header.channels);
    const std::size_t have = parser.rest().size();
    const bool ascii = kind == '2' || kind == '3';
    if (samples && (ascii ? (have + 1) / 2 < *samples : have < *samples))
      throw_error(errc::truncated, "PNM: " + std::to_string(have) + " bytes cannot hold " + std::to_string(*samples) + " samples");
  }
  Image image = allocate_image(header.width, header.height, header.channels, options.limits, "PNM");
  if (kind == '2' || kind == '3') read_ascii_samples(parser, image);
  else read_binary_samples(parser, image);
  return image;
}

}  // namespace detail

std::vector<std::uint8_t> encode_pnm_bytes(const ImageView& image) {
  detail::check_view(image, "PNM");
  const std::size_t row = std::size_t{image.width} * image.channels;
  std::vector<std::uint8_t> out;
  append(out, pnm_header_text(image));
  out.reserve(out.size() + row * image.height);
  for (std::uint32_t y = 0; y < image.height; ++y) {
    const std::uint8_t* begin = image.data + y * detail::row_bytes(image);
    out.insert(out.end(), begin, begin + row);
  }
  return out;
}

}  // namespace l3
