// The load-test tools' network errors in words. Beast's and Asio's own
// texts ("bad version", "bad chunk", "partial message", "end of stream",
// "End of file") say neither who did what nor at which layer; they stay in
// the message (after a colon or in parentheses) for searching.
#pragma once
#include <boost/system/error_code.hpp>
#include <exception>
#include <string>

namespace pagoda::loadtest {

// An error reading a server's response (HTTP, SSE or WebSocket):
//  * closed before any byte of the response: "server closed the connection
//    without sending a response (end of stream)";
//  * closed inside it: "server closed the connection before the response
//    was complete (partial message)";
//  * any other Beast HTTP parse error: "malformed HTTP response from the
//    server: bad chunk";
//  * anything else: the error's own message.
std::string describe_net_error(const boost::system::error_code& ec);

// A client's exception: a boost::system::system_error as
// describe_net_error (its what() adds a source location), anything else its
// what().
std::string describe_exception(const std::exception& e);

}  // namespace pagoda::loadtest
