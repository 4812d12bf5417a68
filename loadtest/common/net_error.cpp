#include "loadtest/common/net_error.h"

#include <boost/asio/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/system/system_error.hpp>

namespace pagoda::loadtest {

namespace http = boost::beast::http;

namespace {

// `words` then `detail`, then `close` (appended: GCC 12's -Wrestrict
// misfires on literal + string).
std::string worded(const char* words, const std::string& detail, const char* close = "") {
  std::string out = words;
  out += detail;
  out += close;
  return out;
}

}  // namespace

std::string describe_net_error(const boost::system::error_code& ec) {
  if (ec == http::error::end_of_stream)  // before any byte of the response
    return worded("server closed the connection without sending a response (", ec.message(), ")");
  if (ec == http::error::partial_message || ec == boost::asio::error::eof)
    return worded("server closed the connection before the response was complete (", ec.message(),
                  ")");
  if (ec.category() == http::make_error_code(http::error::bad_version).category())
    return worded("malformed HTTP response from the server: ", ec.message());
  return ec.message();
}

std::string describe_exception(const std::exception& e) {
  if (const auto* se = dynamic_cast<const boost::system::system_error*>(&e))
    return describe_net_error(se->code());
  return e.what();
}

}  // namespace pagoda::loadtest
