#include "cli/admin_client.h"

#include <strings.h>

#include "client/url.h"
#include "codec/admin_json.h"
#include "service/query.h"

namespace kvc::cli {

Status AdminHttpError(int status, const std::string& body) {
  std::string text;
  if (auto a = codec::ParseAdminImportAnswer(body); a.ok()) text = a->error;
  if (text.empty()) text = "the server answered HTTP " + std::to_string(status);
  switch (status) {
    case 400:
      return InvalidArgument(text);
    case 401:
      return Status(StatusCode::kUnauthenticated, text);
    case 403:
      return Status(StatusCode::kPermissionDenied, text);
    case 404:
      return NotFound(text);
    case 409:
      return AlreadyExists(text);
    case 413:
      return Status(StatusCode::kPayloadTooLarge, text);
    case 503:
      return Unavailable(text);
    default:
      return Internal(text);
  }
}

Result<std::unique_ptr<AdminClient>> AdminClient::Connect(const Options& o) {
  if (o.token.empty()) return InvalidArgument("the admin API needs an admin token");
  auto url = client::ParseUrl(o.url);
  if (!url.ok()) return InvalidArgument("--url: " + url.status().message());
  std::unique_ptr<AdminClient> client(new AdminClient());
  client->admin_ = url->path;
  while (!client->admin_.empty() && client->admin_.back() == '/') client->admin_.pop_back();
  client->admin_ += "/admin/v1";
  client->base_ = client->admin_ + "/databases/" + service::EncodeQueryValue(o.db);
  client::BlockingClientOptions bo;
  bo.origin = *url;
  bo.ca_file = o.ca_file;
  bo.insecure = o.insecure;
  bo.connect_timeout = o.connect_timeout;
  client->request_timeout_ = o.request_timeout;
  KVC_ASSIGN_OR_RETURN(client->http_, client::BlockingClient::Connect(bo));
  client->headers_ = std::make_shared<const client::Headers>(
      client::Headers{{"authorization", "Bearer " + o.token}});
  return client;
}

Result<client::Response> AdminClient::Post(const std::string& what, std::string body,
                                           const std::string& content_type) {
  return http_->Call(MakeRequest(base_ + "/" + what, std::move(body), content_type),
                     request_timeout_);
}

Result<client::Response> AdminClient::PostAdmin(const std::string& path, std::string body,
                                                const std::string& content_type) {
  return http_->Call(MakeRequest(admin_ + "/" + path, std::move(body), content_type),
                     request_timeout_);
}

Result<client::Response> AdminClient::Send(const std::string& method, const std::string& path,
                                           std::string body) {
  client::Request r = MakeRequest(admin_ + "/" + path, std::move(body), "application/json");
  r.method = method;
  if (method != "POST") r.extra_headers.clear();
  return http_->Call(std::move(r), request_timeout_);
}

Status AdminClient::PostStreaming(const std::string& what, std::string body,
                                  std::function<void(std::string_view)> on_data,
                                  std::string* versionstamp) {
  int status = 0;
  std::string error_body;
  client::StreamHandlers h;
  h.on_head = [&status, versionstamp](const client::Response& head) {
    status = head.status;
    for (const auto& [name, value] : head.headers) {
      if (strcasecmp(name.c_str(), "x-kvc-versionstamp") == 0) *versionstamp = value;
    }
  };
  h.on_data = [&](std::string_view data) {
    if (status == 200) {
      on_data(data);
    } else if (error_body.size() < (1u << 20)) {
      error_body.append(data);
    }
  };
  Status s = http_->CallStreaming(
      MakeRequest(base_ + "/" + what, std::move(body), "application/json"), std::move(h));
  if (status != 0 && status != 200) return AdminHttpError(status, error_body);
  if (!s.ok()) {
    return Status(s.code(),
                  "the export was cut short (" + s.message() + "); the output is incomplete");
  }
  return Status::Ok();
}

client::Request AdminClient::MakeRequest(const std::string& path, std::string body,
                                         const std::string& content_type) const {
  client::Request r;
  r.path = path;
  r.headers = headers_;
  r.extra_headers.emplace_back("content-type", content_type);
  r.body = std::move(body);
  return r;
}

}  // namespace kvc::cli
