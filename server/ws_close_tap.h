// CloseFrameTap: the stream layer under /v1/ws's websocket::stream (between
// Beast's WebSocket and the tcp_stream). It passes every byte through and
// follows the client's frames (RFC 6455 section 5.2: opcode in byte 0, the
// 7/16/64-bit payload length, the 4-byte mask of client frames) to note a
// close frame (opcode 0x8) as soon as its first byte is read.
//
// Why: a client that sends its close frame and closes the socket at once
// (with unread data, so its kernel answers with a reset) makes a pending
// write fail in the same reactor pass that reads the close frame; Beast
// then aborts the read (its stream has failed) without parsing the frame,
// and the connection would look lost rather than closed (the requests kept
// for the resume grace period instead of aborted). The tap has seen the
// bytes by the time that read completes.
//
// Only the reads Beast issues pass here; Beast's closing handshake reads
// the socket directly (teardown), after the close frame is known anyway.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/teardown.hpp>

namespace pagoda {

class CloseFrameTap {
 public:
  using next_layer_type = boost::beast::tcp_stream;
  using executor_type = next_layer_type::executor_type;

  explicit CloseFrameTap(next_layer_type&& next) : next_(std::move(next)) {}

  next_layer_type& next_layer() { return next_; }
  const next_layer_type& next_layer() const { return next_; }
  executor_type get_executor() { return next_.get_executor(); }

  // The client has sent (the start of) a close frame.
  bool close_frame_seen() const { return close_seen_; }

  template <class MutableBufferSequence, class ReadHandler>
  auto async_read_some(const MutableBufferSequence& buffers, ReadHandler&& handler) {
    return boost::asio::async_initiate<ReadHandler, void(boost::system::error_code, std::size_t)>(
        [this](auto h, const MutableBufferSequence& b) {
          next_.async_read_some(
              b, [this, b, h = std::move(h)](boost::system::error_code ec, std::size_t n) mutable {
                scan(b, n);
                std::move(h)(ec, n);
              });
        },
        handler, buffers);
  }

  template <class ConstBufferSequence, class WriteHandler>
  auto async_write_some(const ConstBufferSequence& buffers, WriteHandler&& handler) {
    return next_.async_write_some(buffers, std::forward<WriteHandler>(handler));
  }

  // Beast's closing handshake on the socket underneath.
  friend void teardown(boost::beast::role_type role, CloseFrameTap& s,
                       boost::system::error_code& ec) {
    using boost::beast::teardown;
    teardown(role, s.next_, ec);
  }
  template <class TeardownHandler>
  friend void async_teardown(boost::beast::role_type role, CloseFrameTap& s,
                             TeardownHandler&& handler) {
    using boost::beast::async_teardown;
    async_teardown(role, s.next_, std::forward<TeardownHandler>(handler));
  }

 private:
  template <class MutableBufferSequence>
  void scan(const MutableBufferSequence& b, std::size_t n) {
    for (auto it = boost::asio::buffer_sequence_begin(b);
         n > 0 && it != boost::asio::buffer_sequence_end(b); ++it) {
      boost::asio::const_buffer buf(*it);
      const std::size_t take = std::min(n, buf.size());
      feed(static_cast<const uint8_t*>(buf.data()), take);
      n -= take;
    }
  }

  // The frame parser: a header (2 to 14 bytes), then `payload_left_` bytes.
  void feed(const uint8_t* p, std::size_t n) {
    while (n > 0) {
      if (payload_left_ > 0) {
        const std::size_t skip = payload_left_ < n ? static_cast<std::size_t>(payload_left_) : n;
        payload_left_ -= skip;
        p += skip;
        n -= skip;
        continue;
      }
      header_[header_len_++] = *p++;
      --n;
      if (header_len_ == 1 && (header_[0] & 0x0F) == 0x8) close_seen_ = true;
      if (header_len_ < 2) continue;
      const uint8_t len7 = header_[1] & 0x7F;
      const std::size_t need = 2 +
                               (len7 == 126   ? 2
                                : len7 == 127 ? 8
                                              : 0) +
                               ((header_[1] & 0x80) ? 4 : 0);
      if (header_len_ < need) continue;
      uint64_t len = len7;
      if (len7 >= 126) {
        len = 0;
        for (std::size_t i = 2; i < 2 + (len7 == 126 ? 2u : 8u); ++i) len = (len << 8) | header_[i];
      }
      payload_left_ = len;
      header_len_ = 0;
    }
  }

  next_layer_type next_;
  std::array<uint8_t, 14> header_{};
  std::size_t header_len_ = 0;
  uint64_t payload_left_ = 0;
  bool close_seen_ = false;
};

}  // namespace pagoda
