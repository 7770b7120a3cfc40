// RootHandler: what answers at `/`. That path is KV Connect's metadata exchange (`POST /`,
// handled by the wrapped KvService), but it is also where a person's browser lands first:
// a GET or HEAD that accepts HTML (a browser's navigation sends `Accept: text/html,...`) is
// sent to the web console with a 302 when the console is on. Every other request, `POST /`
// above all, goes to the wrapped handler unchanged (curl's `Accept: */*` still gets KV
// Connect's 405).
//
// Ownership: borrows `inner`, which must outlive the handler.
// Thread-safety: immutable after construction; Handle() from any thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "service/http_types.h"

namespace kvc::service {

class RootHandler : public Handler {
 public:
  // `console_path`: where browsers are sent (e.g. "/console"); empty: the console is off and
  // every request goes to `inner`.
  RootHandler(Handler* inner, std::string console_path)
      : inner_(inner), console_path_(std::move(console_path)) {}

  void Handle(HttpRequest request, Responder respond) override;

  // Whether an Accept header value names text/html (exactly, case-insensitive) with a
  // q-value above 0. `*/*` and `text/*` do not count: only a browser asks for HTML by name.
  static bool AcceptsHtml(std::string_view accept);

 private:
  Handler* inner_;
  const std::string console_path_;
};

}  // namespace kvc::service
