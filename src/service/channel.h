// The response-upgrade seam: a bidirectional message channel between a handler and a client,
// what a WebSocket watch channel (KV Connect protocol v4) needs and a streaming response cannot
// give (a stream only flows to the client). Nothing implements it yet; this is the shape the
// sessions and a route agree on, so adding one touches net/ and the route, not the router.
//
// How a route asks for it:
//   1. The session sets HttpRequest::upgrade to the protocol a request asks to switch to when it
//      can complete that switch ("websocket": an HTTP/1.1 GET with `Upgrade: websocket` and a
//      valid handshake, or an HTTP/2 extended CONNECT with `:protocol: websocket`, RFC 8441,
//      whose method the session reports as GET). No session sets it today.
//   2. The route registers its endpoint as any other (GET, a pattern, a metrics name); its
//      handler answers a request with `upgrade == "websocket"` with UpgradeResponse(channel), and
//      any other request as it likes (e.g. 426 or a plain stream).
//   3. The session then completes the handshake (101, or 200 on HTTP/2), calls
//      channel->Open(peer) once, OnMessage() for each message from the client, and OnClosed()
//      exactly once when the channel ends for any reason (the client closed it, the
//      connection broke, shutdown). The router counts the request (metrics) at the switch.
//   The router answers 500 in place of a channel answer to a request whose session did not offer
//   one, so a handler cannot leave a client waiting on a switch that never happens.
//
// Ownership: the session holds the Channel (shared) until OnClosed() returns; the Channel holds
// its ChannelPeer and must drop it in OnClosed().
// Thread-safety: ChannelPeer methods are thread-safe (engine threads call them). Channel
// methods are called by the session, one at a time, on its own thread, and must not block.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "service/http_types.h"

namespace kvc::service {

// One message in either direction.
struct ChannelMessage {
  bool binary = false;  // false: UTF-8 text
  std::string data;
};

// The session's side of a channel: what the route sends to the client.
class ChannelPeer {
 public:
  virtual ~ChannelPeer() = default;
  // Queues a message for the client; dropped after Close() or once the channel ended.
  virtual void Send(ChannelMessage message) = 0;
  // Ends the channel with a close code (WebSocket's: 1000 normal, 1011 server error) and a
  // short reason. OnClosed() follows.
  virtual void Close(uint16_t code, std::string reason) = 0;
};

// The route's side of a channel.
class Channel {
 public:
  virtual ~Channel() = default;
  // The switch is complete; `peer` sends to the client from now on.
  virtual void Open(std::shared_ptr<ChannelPeer> peer) = 0;
  // A message from the client.
  virtual void OnMessage(ChannelMessage message) = 0;
  // The channel ended (`code` as the client or the session closed it); release everything.
  virtual void OnClosed(uint16_t code) = 0;
};

// The answer that asks the session to switch `request`'s connection to `channel`.
// REQUIRES: the request's `upgrade` is non-empty (else the router answers 500 instead).
inline HttpResponse UpgradeResponse(std::shared_ptr<Channel> channel) {
  HttpResponse r;
  r.status = 101;
  r.channel = std::move(channel);
  return r;
}

}  // namespace kvc::service
